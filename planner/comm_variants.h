// ZeRO++ and MiCS in the search: on a multi-node cluster, the planner tries the communication
// variants DeepSpeed 0.19 offers for ZeRO-3 -- hpZ groups that divide a node (alone or with qwZ
// and qgZ), qwZ and qgZ alone, MiCS shards that divide the cluster -- on its best fitting
// stage-3 configs, and ranks them with the rest. They are variants of the best configs rather
// than knobs of the grid so that the search stays the size it was: the variants change the
// communication and a little memory, not which batch split or checkpointing fits
// (docs/planner.md "ZeRO++ and MiCS").
#ifndef ZPLAN_PLANNER_COMM_VARIANTS_H_
#define ZPLAN_PLANNER_COMM_VARIANTS_H_

#include <string>
#include <vector>

#include "planner/evaluate.h"
#include "planner/plan.h"
#include "planner/search_space.h"

namespace zplan::planner {

// The best fitting stage-3 configs the variants are tried on.
inline constexpr size_t kCommVariantBases = 3;
// A variant is kept (ranked, recommendable) only when it is faster than its plain config by
// more than this: qwZ and qgZ quantize what is communicated (DeepSpeed's own tests compare them
// with loose tolerances), hpZ costs a copy of the parameters and MiCS more memory, so a gain
// within the simulator's resolution is not worth recommending them.
inline constexpr double kCommVariantMargin = 0.03;

// The ZeRO++ and MiCS variants of a plain stage-3 `base` DeepSpeed accepts on the problem's
// cluster (empty on one node): hpZ sizes dividing the node's GPUs, each with qwZ and qgZ on or
// off; qwZ and qgZ without hpZ; MiCS shards of a divisor of the node or a power-of-two number of
// whole nodes that divide the cluster (hierarchical gathers too for shards over nodes), without
// optimizer offload (DeepSpeed's MiCS refuses it) or parameter offload (not modelled, as hpZ's).
std::vector<Candidate> comm_variants(const Problem& problem, const Candidate& base);

// Evaluates the variants of the best fitting plain stage-3 configs of `s` (those options.comm
// allows) and appends those that fit and beat their plain config by more than kCommVariantMargin
// (to candidates, evals and the counts of stats); the caller ranks again. Nothing on one node.
void add_comm_variants(const Problem& problem, const EvalOptions& options, SearchResult* s);

// Why a ZeRO++ or MiCS candidate `i` does what it does, for the explanation: what each part
// changes (and that qwZ and qgZ are lossy), the inter-node bytes per step against the same
// config in plain ZeRO-3 ("unchanged" when they move by less than 1%), and, when that config was
// evaluated, the speed against it -- with the latency figures when the gain is mostly the
// collectives' fixed latency on the critical path (fewer ranks per ring) rather than bytes.
// Empty for a plain candidate.
std::string comm_variant_reason(const Problem& problem, const SearchResult& s, size_t i);

}  // namespace zplan::planner

#endif  // ZPLAN_PLANNER_COMM_VARIANTS_H_
