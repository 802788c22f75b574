// validate(): the same step simulated (sim::simulate_step) and executed (execute_steps), compared
// -- step time, time per phase and peak memory per tier, predicted vs measured, with the error in
// percent: the loop calibrate -> simulate -> execute that DESIGN.md §7 closes.
//
// Phases: for each micro-step, its forward (until the last forward task ends) and its backward
// (the rest: backward, reductions, offload copies); then the optimizer step (its own graph).
// Micro-steps are grouped by kind: the first, the middle ones (averaged), the last.
// Memory: per rank (host tiers of a node divided by its ranks), without the runtime category
// (CUDA context, NCCL buffers, the host process), which the executor's tracking allocator cannot
// see; on a CPU profile those are zero anyway.
// Error = (predicted - measured) / measured.
#ifndef ZPLAN_EXECUTOR_VALIDATE_H_
#define ZPLAN_EXECUTOR_VALIDATE_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "executor/executor.h"
#include "sim/simulate.h"
#include "sim/trace_writer.h"

namespace zplan::executor {

struct ValidationRow {
  std::string name;  // "step time", "forward (micro-step 0)", "peak gpu", ...
  std::string unit;  // "s" or "bytes"
  double predicted = 0;
  double measured = 0;
  bool checked = false;  // counts for --max-error
  double error() const { return measured != 0 ? (predicted - measured) / measured : 0; }
};

struct ValidationReport {
  std::vector<ValidationRow> time;
  std::vector<ValidationRow> memory;
  // Busy time of each kind of task summed over the step ("forward", "all_reduce", "h2d", ...):
  // where a time error comes from.
  std::vector<ValidationRow> tasks;
  sim::StepResult predicted;
  ExecutionResult measured;
  // Per rank, at each tier's peak: the simulator's breakdown and rank 0's measured one.
  std::array<sim::MemoryBreakdown, sim::kNumTiers> predicted_at_peak{};
  std::array<sim::MemoryBreakdown, sim::kNumTiers> measured_at_peak{};
  // The largest |error| among the checked rows, as a fraction.
  double max_checked_error() const;
  nlohmann::json to_json() const;
};

struct ValidateOptions {
  ExecuteOptions execute;
  // If set (rank 0 matters), receives the measured trace: every graph of the median step.
  sim::TraceWriter* measured_trace = nullptr;
};

// Every rank of device.comm() calls it; all of them get the same report (the simulation is cheap
// and deterministic; measurements are combined over ranks). Throws InputError for a setup the
// executor does not run.
ValidationReport validate(const models::Model& model, const hardware::Cluster& cluster,
                          const sim::DsConfig& config, const sim::Workload& workload,
                          ExecutorDevice& device, const ValidateOptions& options);

// Phase durations of one graph's timings: {forward, rest} for a micro-step.
struct PhaseTimes {
  double forward_s = 0;
  double backward_s = 0;
  double total_s = 0;
};
PhaseTimes phase_times(const sim::StepGraph& graph, const sim::EngineResult& result);

}  // namespace zplan::executor

#endif  // ZPLAN_EXECUTOR_VALIDATE_H_
