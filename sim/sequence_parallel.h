// DeepSpeed-Ulysses sequence parallelism (docs/cost_model.md "Ulysses sequence parallelism"):
// each of sp consecutive ranks holds s/sp tokens of every sample; around attention, all-to-alls
// inside the sequence-parallel group turn q, k, v from sequence-sharded [s/sp, heads] into
// head-sharded [s, heads/sp] and the output back (deepspeed/sequence/layer.py
// DistributedAttention, runtime/sequence_parallel/ulysses_sp.py UlyssesSPAttentionHF). ZeRO still
// partitions and reduces over every rank (the sequence-data-parallel group, parallel_state_sp.py).
#ifndef ZPLAN_SIM_SEQUENCE_PARALLEL_H_
#define ZPLAN_SIM_SEQUENCE_PARALLEL_H_

#include <string>

#include "hardware/profile.h"
#include "models/model.h"
#include "sim/ds_config/zero_config.h"
#include "sim/step_costs.h"
#include "sim/zeropp_mics.h"

namespace zplan::sim {

// The sequence-parallel group of `sp` consecutive ranks (parallel_state_sp.py
// initialize_sequence_parallel): inside one node when sp <= GPUs per node.
CommGroup sequence_parallel_group(int sp, const hardware::Cluster& cluster);

// What UlyssesSPAttentionHF.__init__ raises on, and what zplan does not model, as InputError at
// `where` (the ds_config's /sequence_parallel_size): heads not divisible by sp; kv heads neither
// dividing nor divided by sp; the sequence length not divisible by sp
// (UlyssesSPDataLoaderAdapter); groups that split nodes; a model without attention or with MLA.
void check_sequence_parallel(const models::Model& model,
                             const Workload& workload, const hardware::Cluster& cluster,
                             const std::string& where);

// Bytes one rank holds in the forward all-to-alls of one attention layer, per micro-batch: q,
// k and v before attention and the output after it (each all-to-all sends (sp-1)/sp of it).
// Backward sends the same bytes again (the gradients, _SeqAllToAll.backward).
struct UlyssesAllToAll {
  double q_bytes = 0;
  double kv_bytes = 0;   // k, and v the same: at max(kv_heads, sp) heads (replicated when fewer)
  double out_bytes = 0;  // the attention output
  double forward_total() const { return q_bytes + 2 * kv_bytes + out_bytes; }
};
UlyssesAllToAll ulysses_all_to_all_bytes(const models::ModelShape& shape, double local_tokens,
                                         int dtype_bytes, int sp);

// Adds the all-to-alls to the time of every piece that runs an attention op: in forward q, k, v
// before and the output after, in backward their gradients (_SeqAllToAll.backward swaps
// scatter and gather), each priced as group_all_to_all_cost in the sequence-parallel group.
// They are synchronous on the compute stream (DistributedAttention and UlyssesSPAttentionHF call
// them with async_op=False and wait), so they lengthen the piece; a recompute of the piece under
// checkpointing repeats the forward pair, as it reruns the layer's forward. No-op at sp = 1.
void add_ulysses_all_to_all(std::vector<Piece>& pieces, const models::Model& model,
                            const hardware::Cluster& cluster, const Workload& workload,
                            const DsConfig& config);

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_SEQUENCE_PARALLEL_H_
