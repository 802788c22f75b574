// Evaluating candidates: the analytic memory bound first (microseconds), the event simulation
// only for what can fit (milliseconds), on every core.
//
// Each candidate's Evaluation is stored at the candidate's index, and each is a pure function of
// (problem, candidate), so the results -- and everything printed from them -- are the same
// whatever the thread count and scheduling. The Model and Cluster are shared read-only by all
// threads; nothing is rebuilt per config that does not depend on it.
#ifndef ZPLAN_PLANNER_EVALUATE_H_
#define ZPLAN_PLANNER_EVALUATE_H_

#include <array>
#include <cstddef>
#include <functional>
#include <vector>

#include "planner/search_space.h"
#include "sim/memory_fit.h"
#include "sim/memory_model.h"
#include "sim/simulate.h"

namespace zplan::planner {

enum class Verdict : uint8_t {
  kFits,        // simulated, and both memory views fit with headroom
  kOverSim,     // the analytic bound fits, the simulated schedule's peak does not
  kPruned,      // the analytic bound does not fit: not simulated
  kOverPruned,  // not pruned (pruning off) but the analytic bound does not fit; simulated anyway
};
const char* verdict_name(Verdict v);  // "fits", "over (simulated)", "pruned", "over"

struct Evaluation {
  Verdict verdict = Verdict::kPruned;
  bool simulated = false;
  // Memory, per tier (GPU per GPU, host and NVMe per node): the larger of the analytic and the
  // simulated peak, and the breakdown at it.
  std::array<double, sim::kNumTiers> peak_bytes{};
  std::array<sim::MemoryBreakdown, sim::kNumTiers> at_peak{};
  double host_peak_bytes = 0;                        // pinned + pageable, as capacity counts it
  sim::Phase gpu_peak_phase = sim::Phase::kForward;  // of the analytic view
  // The verdict on memory: the peaks above against capacity with the problem's headroom (before
  // the simulation, the analytic bound alone).
  sim::MemoryFit fit;
  // Time (when simulated).
  double step_time_s = 0;
  double samples_per_s = 0;
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;
  double mfu = 0;
  double hfu = 0;
  std::array<double, sim::kNumPathParts> critical_path_s{};
  std::array<double, sim::kNumPathParts> critical_latency_s{};  // StepResult's
  std::array<sim::ResourceUse, sim::kNumResources> resources{};

  bool fits() const { return verdict == Verdict::kFits; }
};

// Which ZeRO++ and MiCS variants a multi-node search tries (planner/comm_variants.h; --comm-
// variants): all of them, only those that communicate exact numbers (hpZ and MiCS, no qwZ or
// qgZ), or none (plain ZeRO only).
enum class CommSearch { kAll, kLossless, kNone };

struct EvalOptions {
  int threads = 0;    // 0: std::thread::hardware_concurrency()
  CommSearch comm = CommSearch::kAll;
  bool prune = true;  // skip the simulation of configs the analytic bound rules out
  // Reuse the outcome of a graph identical to one simulated before (sim::SimWorkspace); false
  // runs the engine on every graph (benchmarks). Results are the same either way.
  bool reuse_outcomes = true;
  // Called from the calling thread about every 100 ms, and once at the end, with the number of
  // candidates done; never from a worker thread.
  std::function<void(size_t done, size_t total)> progress;
};

struct SearchStats {
  size_t generated = 0;  // valid, distinct configurations
  size_t pruned = 0;     // ruled out by the analytic memory bound
  size_t simulated = 0;  // event-simulated
  size_t fitting = 0;    // simulated and fit with headroom
  double wall_s = 0;     // not printed in deterministic outputs (benchmarks only)
  // Graphs (micro-steps and optimizer steps) run through the engine, and answered from an
  // identical one instead (benchmarks only). Reuse inside a unit of work (evaluate_all) is the
  // same on any number of threads; a graph shared by two units is reused only when one thread
  // took both, so graphs_reused can differ with the thread count. Their sum cannot.
  size_t graphs_run = 0;
  size_t graphs_reused = 0;
  // Tasks of the graphs run, and how many of them the engine jumped over as repeats of a steady
  // layer (sim::EngineResult::skipped_tasks) instead of simulating them one by one.
  size_t tasks_run = 0;
  size_t tasks_jumped = 0;
  // Simulated configs answered whole from an equivalent one: evaluate_all simulates each set of
  // configs with equal step inputs (sim::StepInputs) once, so this is the same on any number
  // of threads.
  size_t steps_reused = 0;
};

// One candidate, on the calling thread. `workspace` (optional) keeps the simulator's buffers
// between calls; one per thread.
Evaluation evaluate_one(const Problem& problem, const sim::DsConfig& config, bool prune,
                        sim::SimWorkspace* workspace = nullptr);

// Every candidate; result i belongs to candidates[i]. First the analytic bound of each, then one
// simulation per set of candidates that are not pruned and have equal step inputs
// (sim::step_inputs: they build the same graphs), whose result each of them takes: the step
// memo, keyed by the whole normalized inputs the builder reads.
std::vector<Evaluation> evaluate_all(const Problem& problem, const SearchSpace& space,
                                     const std::vector<Candidate>& candidates,
                                     const EvalOptions& options, SearchStats* stats);

// Indices of `evals` on the Pareto front of throughput (higher is better) against peak GPU
// memory (lower is better), among configs that fit: no other fitting config is at least as fast
// with at most as much memory and strictly better in one. Sorted by memory.
std::vector<size_t> pareto_front(const std::vector<Evaluation>& evals);

// Fitting configs first, fastest first; then the ones that do not fit, nearest to fitting first.
// Ties: less GPU memory, then the lower index (enumeration order), so the order is total.
std::vector<size_t> rank_order(const std::vector<Evaluation>& evals);

}  // namespace zplan::planner

#endif  // ZPLAN_PLANNER_EVALUATE_H_
