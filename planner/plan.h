// The planner's answers: a search (every candidate of a space, evaluated and ranked) and, on top
// of it, a plan -- the recommended configuration, why it wins, the alternatives and why they
// lose, what the config needs outside ds_config.json, and, when nothing fits, what would.
//
// Ranking: throughput (tokens/s) among configs that fit with headroom in both memory views.
// Recommendation: the fastest, except that offloading is a fallback -- a config that offloads
// more (CPU, then NVMe) is recommended over the fastest config that offloads less only if it is
// faster by more than PlanOptions::offload_margin -- and so is quantized communication: a lossy
// ZeRO++ variant only if it beats the best lossless config by more than
// PlanOptions::lossy_margin (docs/planner.md, "Ranking").
// Explanations follow fixed rules on the simulated critical path and the memory shortfall
// (docs/planner.md, "Explanations"); all text is a pure function of the results.
#ifndef ZPLAN_PLANNER_PLAN_H_
#define ZPLAN_PLANNER_PLAN_H_

#include <optional>
#include <string>
#include <vector>

#include "planner/evaluate.h"
#include "planner/launch.h"
#include "planner/search_space.h"

namespace zplan::planner {

struct SearchResult {
  SearchSpace space;
  std::vector<Candidate> candidates;
  std::vector<Evaluation> evals;  // evals[i] belongs to candidates[i]
  SearchStats stats;
  std::vector<size_t> order;   // rank_order(): fitting fastest first, then nearest misses
  std::vector<size_t> pareto;  // pareto_front(), by memory
};

// The ds_config of search.candidates[index] as the search evaluated it (the keys the prediction
// reads): the one plan() recommends and sweep's report shows.
sim::DsConfig config_of(const Problem& problem, const SearchResult& search, size_t index);

// Resolves the space, enumerates and evaluates it. Throws InputError for bad requests
// (resolve_search_space).
SearchResult run_search(const Problem& problem, const KnobRequest& knobs, const BatchRequest& batch,
                        const EvalOptions& options);

// The default offload margin. DeepSpeed's offload paths have host-side costs the simulator does
// not model and the user's machine varies most in -- per-parameter Python hooks, synchronization
// around the CPU step, pinned-memory registration, CPU cores and memory bandwidth shared with
// the data loader -- and offload needs host memory, a CPU Adam build and (NVMe) a local drive.
// So an offloading config must beat the best config that offloads less by a clear margin.
inline constexpr double kDefaultOffloadMargin = 0.30;

// The default lossy margin: a config that quantizes what it communicates (ZeRO++ qwZ's int8
// weights, qgZ's int4 gradients; CommVariant::lossy) trains with other numbers than plain ZeRO-3,
// which only the user's own loss curve can show harmless, and needs DeepSpeed's quantizer op; so
// it is recommended over the best lossless config (plain ZeRO, hpZ, MiCS) that offloads no more
// only when it is faster by more than the error of zplan's own predicted speed-ups for these
// schemes: against the published ZeRO++ and MiCS speed-ups over ZeRO-3 (docs/fidelity.md item 8)
// that error has a median of 16% (7 figures; zplan's gain is the smaller in 6), so a predicted
// gain below about 15% is not evidence enough to trade exact numerics for (docs/planner.md
// "Ranking").
inline constexpr double kDefaultLossyMargin = 0.15;

struct PlanOptions {
  EvalOptions eval;
  double offload_margin = kDefaultOffloadMargin;
  double lossy_margin = kDefaultLossyMargin;
  std::string ds_config_file = "ds_config.json";  // named in the launch lines
  DsConfigFormat ds_config_format = DsConfigFormat::kDeepSpeed;  // what the written file is for
};

struct Alternative {
  size_t index = 0;  // into SearchResult::candidates
  std::string why;   // one line: why it loses
};

struct PlanResult {
  SearchResult search;
  std::optional<size_t> recommended;
  // The recommended config as planned (the keys the prediction reads), checked by
  // validate_ds_config; set exactly when `recommended` is. The ds_config to write is
  // runnable_config of it (planner/launch.h).
  std::optional<sim::DsConfig> recommended_config;
  std::string why;  // one line: why the recommended config wins
  std::vector<Alternative> alternatives;
  // What the recommended config needs outside ds_config.json (checkpointing in the model, the
  // NVMe path, the CPU Adam op, ...), one line each.
  std::vector<std::string> needs;
  // Further facts worth a line (e.g. how many GPUs it would take without offload).
  std::vector<std::string> notes;
  // When nothing fits: the nearest miss and what would fit, one line each.
  std::optional<size_t> closest;
  std::vector<std::string> what_would_fit;
};

PlanResult plan(const Problem& problem, const KnobRequest& knobs, const BatchRequest& batch,
                const PlanOptions& options);

// The config plan() recommends among a ranked search whose first config fits: the fastest,
// except that offload and quantized communication are fallbacks -- the best of the lowest offload
// level within options.offload_margin of the fastest, then, if that one is lossy
// (CommVariant::lossy), the best lossless config that offloads no more unless the lossy one is
// faster than it by more than options.lossy_margin.
size_t recommend(const SearchResult& search, const PlanOptions& options);

// The smallest number of GPUs above the current count (whole nodes of the profile's size) on
// which some configuration that offloads at most `max_offload_level` (0 none, 1 CPU, 2 NVMe)
// fits by the analytic bound, at micro-batch 1 with checkpointing and the smallest buffers;
// nullopt if none does up to 4096 nodes. ZeRO memory per GPU and host memory per node never
// grow with more nodes, so the count found by bisection is the smallest.
struct GpuCount {
  int gpus = 0;
  int nodes = 0;
  Candidate how;
  double gpu_peak_bytes = 0;
  double gpu_capacity_bytes = 0;
};
std::optional<GpuCount> min_gpus_to_fit(const Problem& problem, const SearchSpace& space,
                                        int max_offload_level);

// The explanation lines, exposed for tests and for the sweep's report.
std::string why_it_wins(const Problem& problem, const SearchResult& search, size_t winner,
                        const PlanOptions& options);
std::string why_it_loses(const Problem& problem, const SearchResult& search, size_t winner,
                         size_t loser, const PlanOptions& options);
// "compute-bound: compute 97% of the step's critical path (MFU 52%), all-gather 2.0%" and the like:
// the shares of the critical path (sim/simulate.h bottleneck()).
std::string what_binds(const Evaluation& e);
// "GPU short by 5.1 GiB at backward (activations 65%)", for a config that does not fit.
std::string shortfall(const Problem& problem, const Evaluation& e);

}  // namespace zplan::planner

#endif  // ZPLAN_PLANNER_PLAN_H_
