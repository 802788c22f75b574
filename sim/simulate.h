// simulate_step(): one optimizer step of a configuration, simulated event by event, and what
// users want to know about it -- time, throughput, where the time goes, memory over time.
//
// Micro-steps end in a synchronization and engine.step() follows the last one, so an optimizer
// step is a sequence of independent simulations: each micro-step's forward and backward, then
// the optimizer step. By default only the micro-steps whose graphs differ are simulated, each
// counted for the ones it stands for (StepBuilder::distinct_micro_steps);
// SimulateOptions::every_micro_step simulates all of them, with the same result (a test), and is
// what the trace shows.
#ifndef ZPLAN_SIM_SIMULATE_H_
#define ZPLAN_SIM_SIMULATE_H_

#include <array>
#include <cmath>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "hardware/profile.h"
#include "models/model.h"
#include "sim/engine.h"
#include "sim/memory_fit.h"
#include "sim/memory_model.h"
#include "sim/step_graph.h"
#include "sim/ds_config/zero_config.h"

namespace zplan::sim {

class TraceWriter;

// Called after each simulated micro-step with its graph, its timings and memory samples, and
// where it starts within the optimizer step. Observers see every micro-step in order.
using MicroStepObserver =
    std::function<void(const StepGraph& graph, const EngineResult& result, double offset_s)>;

struct ResourceUse {
  double busy_s = 0;     // time it ran tasks
  double exposed_s = 0;  // time it ran while the compute stream was idle (not overlapped)
};

// Where the step's critical path spends its time, by kind of work.
// kHost: compute-stream time the GPU spent waiting for the Python thread that issues its kernels
// (the host floor of docs/cost_model.md §14: operator dispatch and stage 3's module hooks).
enum class PathPart { kCompute, kAllGather, kReduce, kHostCopy, kCpuOptimizer, kNvme, kHost };
inline constexpr int kNumPathParts = 7;
const char* path_part_name(PathPart part);  // "compute", "all-gather", "reduction", ...

// What binds a step, from where its critical path spends its time (`path_s`, of which
// `latency_s` is the fixed latency of the tasks on it: for a collective, NCCL's latency and the
// launch; the rest ran at link bandwidth): "compute-bound" when compute is at least 90% of the
// step, else the largest exposed part, and for a collective whether latency or bandwidth
// dominates it, e.g. "communication-bound: all-gather, bandwidth-dominated (62% of the step,
// latency 9%)", or "bound by CPU optimizer (23% of the step)". `step_s` is the step time.
std::string bound_phrase(const std::array<double, kNumPathParts>& path_s,
                         const std::array<double, kNumPathParts>& latency_s, double step_s);
// The same verdict as one short word pair for tables: "compute", "all-gather (bandwidth)",
// "gradient reduction (latency)", "CPU optimizer"...
std::string bound_short(const std::array<double, kNumPathParts>& path_s,
                        const std::array<double, kNumPathParts>& latency_s, double step_s);
// Compute's share of the step at or above which a step is called compute-bound.
inline constexpr double kComputeBoundShare = 0.90;
// Whether compute's share of the step (a fraction) makes it compute-bound, judged on the share
// as every output prints it, in whole percent: "compute 90%" is never called communication-bound.
inline bool is_compute_bound(double compute_share) {
  return std::round(100 * compute_share) >= 100 * kComputeBoundShare;
}

// What simulate_step keeps of one simulated graph (a micro-step or the optimizer step).
struct GraphOutcome {
  double duration_s = 0;
  std::array<ResourceUse, kNumResources> resources{};
  std::array<double, kNumPathParts> critical_path_s{};
  std::array<double, kNumPathParts> critical_latency_s{};  // the fixed-latency part of each
  double wire_bytes = 0;
  std::array<double, kNumTaskKinds> wire_bytes_by_kind{};
  std::array<double, kNumTaskKinds> tasks_by_kind{};
  std::array<double, kNumTaskKinds> bytes_by_kind{};  // Task::bytes summed
  std::array<double, kNumTiers> peak{};  // per rank
  std::array<MemoryBreakdown, kNumTiers> at_peak{};
  std::array<MemoryBreakdown, kNumTiers> final_memory{};
  size_t tasks = 0;
  uint64_t events = 0;
};

struct StepResult {
  double step_time_s = 0;
  std::vector<double> micro_step_s;  // the simulated micro-steps (distinct ones by default)
  std::vector<int> micro_step_repeats;
  double optimizer_step_s = 0;  // engine.step() after the last micro-step
  double samples_per_s = 0;
  double tokens_per_s = 0;
  double model_flops_per_gpu = 0;     // per optimizer step: 3 x forward, no recompute
  double hardware_flops_per_gpu = 0;  // with the recomputed forward
  double tflops_per_gpu = 0;          // model FLOPs / step time
  double mfu = 0;                     // tflops_per_gpu / peak
  double hfu = 0;                     // hardware FLOPs / step time / peak
  // The peak FLOP/s MFU and HFU are against: hardware::peak_flops_per_s at the config's precision.
  double peak_flops_per_s = 0;
  std::array<ResourceUse, kNumResources> resources{};
  std::array<double, kNumPathParts> critical_path_s{};  // sums to step_time_s
  // Of each part, the fixed latency of its tasks (collectives: NCCL latency and launch); the rest
  // of the part ran at link bandwidth or compute rate.
  std::array<double, kNumPathParts> critical_latency_s{};
  double wire_bytes = 0;  // bytes each rank sent in collectives per optimizer step
  std::array<double, kNumTaskKinds> wire_bytes_by_kind{};
  // Tasks of each kind per optimizer step, and their sizes summed (a collective's nccl-tests S):
  // how many collectives a step launches and how large they are on average. (A stage 1-2 kReduce
  // task stands for one dist.reduce per owner rank.)
  std::array<double, kNumTaskKinds> tasks_by_kind{};
  std::array<double, kNumTaskKinds> bytes_by_kind{};
  // Simulated memory: peak per tier (GPU per GPU, host tiers and NVMe per node), the breakdown
  // at the peak, and what exists before the first task (the steady model states).
  std::array<double, kNumTiers> peak_bytes{};
  std::array<MemoryBreakdown, kNumTiers> at_peak{};
  std::array<MemoryBreakdown, kNumTiers> steady{};
  // The GPU peak is deepspeed.initialize's, before the first step: stage 3 partitioning a model
  // built outside zero.Init (init_gpu_memory), which held more than the step does.
  bool gpu_peak_at_init = false;
  MemoryReport analytic;  // the analytic model's view, for the verdict and comparison
  double host_peak_bytes = 0;
  // The larger of the simulated peak and (if computed) the analytic bound, per tier, against
  // capacity with no headroom.
  MemoryFit fit;
  size_t tasks = 0;
  uint64_t events = 0;

  // One line: the critical path by kind of work, largest first, as shares of the step time
  // (critical_path_s), e.g. "gradient reduction 80%, compute 14%, all-gather 5%". A part counts
  // every task of it the step waited on, whole, even where compute ran beside it: so it can
  // exceed the time its stream ran with compute idle (ResourceUse::exposed_s), which counts
  // only the stretches compute did not hide.
  std::string bottleneck() const;
  // bound_phrase() of this step: what binds it, and for a collective, latency or bandwidth.
  std::string bound() const;
};

// Buffers simulate_step reuses between calls instead of allocating them each time; keep one per
// thread when simulating many configurations (the planner does).
//
// It also remembers the outcome of every graph it simulated, by fingerprint: configurations that
// differ only in knobs that leave a micro-step unchanged (a prefetch bucket smaller than every
// module, say) build identical graphs, and the second one reuses the first one's outcome instead
// of running the engine again. The outcome is a function of the graph alone, so results are
// identical with or without it, and whatever order threads meet the graphs in.
struct SimWorkspace {
  Simulator simulator;
  StepGraph graph;
  EngineResult result;
  bool reuse_outcomes = true;  // false: run the engine on every graph (benchmarks)
  std::unordered_map<GraphFingerprint, GraphOutcome, GraphFingerprintHash> outcomes;
  size_t reused = 0;     // graphs answered from `outcomes`
  size_t simulated = 0;  // graphs run through the engine
  size_t tasks_run = 0;  // tasks of those graphs
  // Of which the engine copied from a repeat (EngineResult::skipped_tasks).
  size_t tasks_jumped = 0;
  ZeroSizesCache sizes;  // for callers that evaluate many configs of one model (the planner)
};

struct SimulateOptions {
  bool every_micro_step = false;
  uint64_t shuffle_seed = 0;          // tests: shuffle equal-time events
  TraceWriter* trace = nullptr;       // if set, receives every task and memory sample (implies
                                      // every_micro_step)
  MicroStepObserver observer;         // if set: like trace (implies every_micro_step and memory
                                      // samples)
  SimWorkspace* workspace = nullptr;  // optional reusable buffers
  bool analytic_memory = true;        // also fill StepResult::analytic (the planner has it already)
  // zero_sizes(model, cluster.gpus, config), when the caller has it already (the planner's bound
  // computed it): not computed again.
  const ZeroSizes* sizes = nullptr;
};

// REQUIRES: config passed validate_ds_config for cluster.gpus.
StepResult simulate_step(const models::Model& model, const hardware::Cluster& cluster,
                         const DsConfig& config, const Workload& workload,
                         const SimulateOptions& options = {});

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_SIMULATE_H_
