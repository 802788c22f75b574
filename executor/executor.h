// The reference executor: runs the step graph the simulator simulates (sim/step_builder.h) for
// real, on one device per rank, and measures it -- the second interpreter of DESIGN.md §1.
//
// Every rank builds the same graphs (ranks are symmetric), and runs each micro-step's graph with
// one worker thread per resource (sim::Resource): a worker runs its resource's tasks in program
// order, each once every task it depends on has ended -- the semantics written in
// sim/step_graph.h. What a task does is real: the model's GEMMs and elementwise kernels
// (the MLP stacks compute a real MSE regression; transformer-shaped models run GEMMs of the right
// shapes and memory passes for the rest), all-gathers, all-reduces of whole buckets,
// reduce-scatters, copies between the device and pinned or pageable host memory, Adam on the
// device or on the CPU (kernels/cpu_adam.h, the kernel calibration times), NVMe swaps through a
// file. Parameters, gradients and Adam states are partitioned as DeepSpeed 0.19 partitions them
// for stages 0-3 (executor/layout.h), and every buffer DeepSpeed allocates is allocated
// through the tracking allocator (executor/memory.h) when the executor needs it; what
// the tracker sees is the measured memory.
//
// Measured: the wall-clock time of each optimizer step (after warm-up steps; the slowest rank),
// each task's start and end on rank 0 (a sim::EngineResult per micro-step, so that the
// simulator's TraceWriter writes the measured trace in the same format), and the peak bytes of
// every tier on every rank.
//
// Not executed: activation checkpointing and cpu_checkpointing, fp16/bf16 (the executor trains in
// fp32; validate requires a config whose precision is fp32), gradient clipping (DeepSpeed's
// gradient norm is one scalar all-reduce the step graph does not have), offload_param = nvme
// with max_in_cpu covering the partition. These are refused with an InputError.
#ifndef ZPLAN_EXECUTOR_EXECUTOR_H_
#define ZPLAN_EXECUTOR_EXECUTOR_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "executor/device.h"
#include "hardware/profile.h"
#include "kernels/cpu_adam.h"
#include "models/model.h"
#include "sim/engine.h"
#include "sim/memory_model.h"
#include "sim/zero_config.h"

namespace zplan::executor {

struct ExecuteOptions {
  int warmup_steps = 1;  // optimizer steps run before measuring (caches, first-touch, Adam states)
  int steps = 3;         // measured optimizer steps; the median one is reported
  uint64_t seed = 20261122;  // initial weights and the synthetic data
  kernels::AdamHyper adam;
  // Where the NVMe swap files go: "" = the config's nvme_path if it is a writable directory, else
  // $TMPDIR or /tmp.
  std::string swap_dir;
  // Testing: this rank exits abruptly (status 3) in the middle of the first measured step.
  int fail_rank = -1;
  // Gather the full parameters after the last step into ExecutionResult::weights (all ranks).
  bool keep_weights = false;
  // Seconds without progress in a collective before the job is aborted (MPI).
  double comm_timeout_s = 60;
};

struct ExecutionResult {
  std::vector<double> step_s;  // every measured step: the slowest rank's wall-clock time
  double step_time_s = 0;      // the median of step_s
  int median_step = 0;         // index into step_s
  // Rank 0's tasks in every graph of the median step -- each micro-step, then the optimizer
  // step: start and end since the graph began, and the tracker's memory samples (host tiers per
  // rank).
  std::vector<sim::EngineResult> micro_steps;
  std::vector<double> micro_step_s;  // their durations (the optimizer step's last)
  // Peak bytes per tier over the measured steps, per rank (the largest rank), and rank 0's
  // breakdown at its peak.
  std::array<double, sim::kNumTiers> peak_bytes{};
  std::array<sim::MemoryBreakdown, sim::kNumTiers> at_peak{};
  // Mean MSE loss of each optimizer step (warm-up ones included), over the global batch.
  std::vector<double> loss;
  // Full parameters in model order after the last step (keep_weights).
  std::vector<float> weights;
  // Seconds the compute stream waited for side work in the median step (rank 0).
  double compute_wait_s = 0;
  std::string device;  // descriptions for the report
  std::string comm;
  std::string pinned;
  std::string swap;
};

// Runs options.warmup_steps + options.steps optimizer steps of (model, config) on this rank;
// every rank of device.comm() calls it with the same arguments. cluster.gpus must equal the
// number of ranks. Throws InputError for a configuration the executor does not run (see above).
ExecutionResult execute_steps(const models::Model& model, const hardware::Cluster& cluster,
                              const sim::DsConfig& config, const sim::Workload& workload,
                              ExecutorDevice& device, const ExecuteOptions& options);

// Throws InputError when the executor does not run (config, cluster) -- the checks execute_steps
// makes first, for callers that want to fail before starting ranks.
void check_executor_supports(const sim::DsConfig& config, const hardware::Cluster& cluster);

// Throws InputError when the run cannot succeed on this machine, before any rank starts: the
// analytic memory model's peaks for all of cluster.gpus ranks (the host tiers per node, plus each
// rank's device memory when it is host memory, as on the CPU device) exceed the memory the kernel
// reports available (MemAvailable), or `swap_dir` is given and is not a writable directory. All
// ranks are assumed to run on this machine, as validate starts them.
void check_executor_fits(const models::Model& model, const hardware::Cluster& cluster,
                         const sim::DsConfig& config, const sim::Workload& workload,
                         const std::string& swap_dir, bool device_memory_is_host = true);

// The channel of kernels::Comm a resource's collectives use, and the control channel.
inline constexpr int kControlChannel = 8;
inline constexpr int kExecutorChannels = 9;

}  // namespace zplan::executor

#endif  // ZPLAN_EXECUTOR_EXECUTOR_H_
