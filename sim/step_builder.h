// StepBuilder: turns (model, cluster, ZeRO config, workload) into the StepGraph of each
// micro-step of one optimizer step, following what DeepSpeed 0.19 issues and when
// (reference/deepspeed_internals.md §4 for communication, §5 for offload, §2 for memory):
//
//  * stage 0: backward, then an all-reduce of all gradients in 5e8-element pieces at the
//    accumulation boundary, then the fused optimizer on the GPU;
//  * stages 1-2: gradients go into reduce_bucket_size buckets in the order backward produces them;
//    a full bucket is all-reduced (use_multi_rank_bucket_allreduce) -- every micro-step in stage
//    2, only at the boundary in stage 1 -- on the reduction stream with overlap_comm (double-
//    buffered: a bucket's buffer is reused two buckets later) or on the compute stream without;
//    after the optimizer step, one all-gather rebuilds the 16-bit parameters;
//  * stage 3: each module's parameters are all-gathered before use, in forward and again in
//    backward, up to two fetches ahead of compute plus what fits the prefetch bucket
//    (stage3_prefetch_bucket_size, stage3_max_live_parameters); persistent parameters stay; a
//    module reused within max_reuse_distance stays gathered; gradient buckets are reduce-scattered
//    on their own stream through one IPG buffer; the optimizer runs per sub-group;
//  * offload: gradients copied to the host as they are reduced, CPU Adam, parameters copied back;
//    NVMe swaps per sub-group (pipeline_read / pipeline_write), parameter fetches from the host
//    or NVMe before the gather; activation checkpointing recomputes each layer before its
//    backward, with cpu_checkpointing copies.
// Micro-steps end with a synchronization (DeepSpeed's backward epilogue), and engine.step()
// runs after the last one, so each micro-step and the optimizer step are graphs of their own.
#ifndef ZPLAN_SIM_STEP_BUILDER_H_
#define ZPLAN_SIM_STEP_BUILDER_H_

#include <limits>
#include <vector>

#include "hardware/cost_model.h"
#include "hardware/profile.h"
#include "models/model.h"
#include "sim/memory_model.h"
#include "sim/step_costs.h"
#include "sim/step_graph.h"
#include "sim/step_inputs.h"
#include "sim/zeropp_mics.h"
#include "sim/ds_config/zero_config.h"

namespace zplan::sim {

struct PendingBucket;

class StepBuilder {
 public:
  // REQUIRES: config passed validate_ds_config for cluster.gpus; `model` is the shard of
  // workload.tensor_parallel (models::tensor_parallel_shard). Keeps references to `model`
  // and `cluster`, which must outlive the builder. It reads the configuration and workload only
  // through their StepInputs, step_inputs(config, workload, sizes) (sim/step_inputs.h), so that
  // a memo keyed by those inputs cannot miss what it builds from. `sizes`, if given, is
  // zero_sizes(model, data_parallel_ranks(cluster, workload), config), which the builder then
  // does not compute again.
  StepBuilder(const models::Model& model, const hardware::Cluster& cluster, const DsConfig& config,
              const Workload& workload, const ZeroSizes* sizes = nullptr);

  // Clears *graph and fills it with the forward and backward of micro-step `micro_step`
  // (0-based, of gradient_accumulation_steps). With finalize false the caller finalizes it (after
  // taking its fingerprint, say).
  void build(int micro_step, StepGraph* graph, bool finalize = true) const;
  // Clears *graph and fills it with the optimizer step, which starts from `start_memory` (what
  // the last micro-step left: model states plus the gradients it reduced).
  void build_optimizer_step(const std::array<MemoryBreakdown, kNumTiers>& start_memory,
                            StepGraph* graph, bool finalize = true) const;

  // Micro-steps whose graphs differ, each with how many micro-steps it stands for (the repeats
  // sum to gradient_accumulation_steps); the last entry is always the boundary micro-step,
  // gas - 1, whose final memory the optimizer step starts from.
  std::vector<std::pair<int, int>> distinct_micro_steps() const;

  // Stage 3's prefetch window is min(stage3_prefetch_bucket_size, stage3_max_live_parameters),
  // read nowhere else. Any window below this bound builds the same graphs as a window of 0 (see
  // Stage3Pass): the reach it adds needs kFetchLookahead + 1 consecutive fetches to fit.
  // Infinite when nothing is fetched.
  static double inert_prefetch_window(const ZeroSizes& sizes);

  // What it builds from (config and workload normalized, sim/step_inputs.h).
  const StepInputs& inputs() const { return inputs_; }
  const ZeroSizes& sizes() const { return sizes_; }
  const ActivationPlan& activations() const { return acts_; }
  // Model states and persistent buffers per rank (persistent_memory of sizes()).
  const std::array<MemoryBreakdown, kNumTiers>& persistent() const { return persistent_; }
  const std::vector<Piece>& pieces() const { return pieces_; }
  // FLOPs per GPU of one micro-step: the model's (forward + backward = 3 x forward) and the
  // hardware's (plus the recomputed forward under activation checkpointing).
  double model_flops_per_micro_step() const { return model_flops_; }
  double hardware_flops_per_micro_step() const { return hardware_flops_; }

 private:
  struct Ctx;  // the state of one build() call
  class SimpleBackward;  // stages 0-2's backward, one per build (step_builder_simple.cc)
  class Stage3Pass;      // stage 3's forward and backward, one per build (step_builder_stage3.cc)
  void build_forward_simple(Ctx& c) const;
  void build_backward_simple(Ctx& c) const;  // a SimpleBackward
  void build_stage3(Ctx& c) const;           // a Stage3Pass
  void build_optimizer(Ctx& c) const;
  void optimizer_stage0(Ctx& c) const;
  void optimizer_stages12(Ctx& c) const;
  void optimizer_bf16(Ctx& c) const;  // BF16_Optimizer at stage 1 (uses_bf16_optimizer)
  void optimizer_stage3(Ctx& c) const;  // per sub-group
  // A task of the optimizer step, sub-group `index`, after `after` unless that is kNoTaskId.
  TaskId step_task(Ctx& c, const Task& t, int index = -1,
                   TaskId after = std::numeric_limits<TaskId>::max()) const;
  TaskId add_compute(Ctx& c, TaskKind kind, int piece) const;
  // Adds `t` to this build's graph as part of its micro-step (or the optimizer step), naming
  // `layer` and `index`, after `after` unless that is kNoTaskId; returns its id.
  TaskId place(Ctx& c, Task t, int layer, int index, TaskId after) const;
  void add_forward_memory(Ctx& c, TaskId t, int layer, bool recompute) const;
  // cpu_checkpointing: copies the layer's checkpoint back before its recompute; returns the copy
  // or kNoTaskId.
  TaskId add_recompute(Ctx& c, int layer, TaskId after_compute) const;
  void add_backward_memory(Ctx& c, TaskId t, int layer, bool last_piece_of_layer) const;
  hardware::CollectiveCost collective(hardware::Collective op, double bytes) const;
  Task collective_task(TaskKind kind, Resource resource, hardware::Collective op,
                       double bytes) const;
  Task copy_task(TaskKind kind, Resource resource, double bytes) const;
  Task memory_task(TaskKind kind, Resource resource, double bytes) const;
  // The fused Adam of the optimizer step on the device over `elems` parameters, with or without
  // writing the updated parameters back to the model's copy.
  Task gpu_adam_task(double elems, bool copy_back) const;
  // Places gpu_adam_task(elems, copy_back) in the optimizer step (step_task's index and after),
  // with the memory its update allocates while it runs (gpu_step_transient_bytes).
  TaskId step_gpu_adam(Ctx& c, double elems, bool copy_back, int index = -1,
                       TaskId after = std::numeric_limits<TaskId>::max()) const;
  // Stage 3's collectives with ZeRO++ and MiCS (step_builder_zeropp.cc). A parameter gather of
  // `fetch` elements -- from hpZ's secondary partition when `secondary` -- as the tasks to place
  // one after the other on `stream`, their copy and (de)quantize kernels counted in.
  std::vector<Task> param_gather_tasks(Resource stream, double fetch, bool secondary) const;
  // A gradient bucket's reduction, likewise; tasks[reduced] is the one after which the rank's
  // partition of the bucket is reduced (MiCS all-reduces it across replicas after that, at the
  // accumulation boundary).
  struct ReducePlan {
    std::vector<Task> tasks;
    size_t reduced = 0;
  };
  ReducePlan grad_reduce_tasks(Resource stream, const PendingBucket& bucket, bool boundary) const;
  // Collective `op` of `bytes` inside group `id` (one the size of the world goes through
  // collective_task), marked with the group for the executor.
  Task group_task(TaskKind kind, Resource resource, hardware::Collective op, double bytes,
                  CommGroupId id) const;
  // Elements at or below which a gradient counts as a vector for qgZ (PendingBucket::vectors).
  double qgz_vector_limit() const;
  // Framework terms of the optimizer step (docs/cost_model.md, "The optimizer step as DeepSpeed
  // runs it"): the passes DeepSpeed's step() makes over the rank's `elems` gradient elements in
  // `tensors` tensors before Adam (overflow check, norm, unscale and clip), their small
  // all-reduces and the step's fixed host time. With `on_host`, the grads are on the CPU
  // (ZeRO-Offload) and only the synchronizations and the host time stay on the compute stream.
  Task optimizer_checks_task(double elems, double tensors, bool on_host) const;
  // Where the host side of an offload copy lives: the optimizer's host buffers, which DeepSpeed
  // pins when offload_optimizer.pin_memory, or a pageable temporary PyTorch allocates whatever
  // that says (a blocking copy_ across devices and dtypes converts on the CPU into a new tensor
  // first: copy_kernel_cuda in aten/src/ATen/native/cuda/Copy.cu).
  enum class HostSide { kOffloadBuffer, kPageableTemporary };
  // A copy between the GPU and host memory: pinned and asynchronous from a pinned buffer, else
  // pageable, and then synchronous with the Python thread (PyTorch's non_blocking has no effect
  // from pageable memory), so it holds the compute stream.
  Task offload_copy_task(TaskKind kind, double bytes,
                         HostSide side = HostSide::kOffloadBuffer) const;
  // The host-side passes of ZeRO-Offload's step around the CPU optimizer over `elems` elements:
  // unscale_and_clip_grads on the host gradients (a read and a write of the master dtype: 8
  // bytes in fp32) and the cast of the new master partition to the model dtype (4 + dtype
  // bytes; none at stage 3 when the master is already in the model dtype), each at the rank's
  // share of host DRAM bandwidth (hardware::host_pass_time_s). None on a cpu device (zplan's
  // executor).
  double offload_host_passes_s(double elems) const;
  // Stage 3's copy of the new master partition into the 16-bit parameters crosses dtypes (fp32
  // master weights), so PyTorch converts it on the CPU into a pageable temporary.
  bool stage3_cast_on_host() const;

  const models::Model& model_;
  const hardware::Cluster& cluster_;
  ZeroSizes sizes_;
  StepInputs inputs_;  // all the builder reads of the configuration and the workload
  const DsConfig& config_ = inputs_.config;
  const Workload& workload_ = inputs_.workload;
  std::array<MemoryBreakdown, kNumTiers> persistent_;
  ActivationPlan acts_;
  std::vector<Piece> pieces_;
  std::vector<int> layer_first_piece_;  // index of each layer's first piece, plus the end
  std::vector<int> module_base_;        // index of each layer's first module among all modules
  int module_count_ = 0;
  double model_flops_ = 0;
  double hardware_flops_ = 0;
  int ranks_per_node_ = 1;
  double param_tensors_ = 0;  // the model's parameter tensors (tied ones once)
  size_t expected_tasks_ = 0;
  // Collective costs repeat (the same module sizes in every layer): memoized per build.
  struct CostEntry {
    hardware::Collective op;
    double bytes;
    hardware::CollectiveCost cost;
  };
  mutable std::vector<CostEntry> cost_cache_;
  ZeroGroups groups_;  // ZeRO++ / MiCS communicators (sim/zeropp_mics.h)
  int dp_ = 1;          // data-parallel ranks: the GPUs / AutoTP size (sim/tensor_parallel.h)
  CommGroup dp_group_;  // their group, over which ZeRO's collectives run
  struct GroupCostEntry {
    hardware::Collective op;
    double bytes;
    int ranks, nodes;
    hardware::CollectiveCost cost;
  };
  mutable std::vector<GroupCostEntry> group_cost_cache_;
};

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_STEP_BUILDER_H_
