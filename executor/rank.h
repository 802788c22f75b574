// ExecutorRank: one rank's training state under ZeRO (parameters, gradients, Adam states, buckets,
// gathered parameters, activations, swap file) and what each task of the step graph does to it.
//
// The task-to-work mapping (ref = reference/deepspeed_internals.md):
//   forward / backward      the piece's ops: GEMMs on the device (real MSE regression for MLP
//                           stacks), gradients into the full gradients (stages 0-1), or into fresh
//                           tensors that the gradient hook copies into the IPG bucket (2-3)
//   bucket_copy             stage 0: flatten a piece of the gradients; stage 3: the interleaved
//                           copy of reduce_scatter_coalesced, which frees the IPG buffer
//   all_reduce              stage 0: the piece, copied back and averaged; stages 1-2: flatten the
//                           bucket, all-reduce it, keep this rank's slices (average_tensor)
//   reduce_scatter          stage 3: of the interleaved copy; without offload it also adds the
//                           slices into grad_partitions_flat_buffer
//   grad_accumulate         stage 2: add this micro-step's partition into the accumulated one
//   d2h / h2d               offload copies (gradients out, the accumulation round trip, new
//                           parameters in, parameter partitions before a gather)
//   optimizer_gpu           stage 0: fused Adam; 1-3: flatten + fp32 copy, then Adam (per
//                           sub-group in stage 3)
//   optimizer_cpu           CPU Adam on the host copy (the same kernel)
//   all_gather              stages 1-2: the flat parameters after the step; stage 3: a module's
//                           parameters, or the persistent ones after the step
//   nvme_read / nvme_write  stage 3 optimizer swap per sub-group, fp32 gradients at the boundary
// ZeRO++ hpZ and MiCS (docs/cost_model.md §13): collectives run in the communicator the task
// names (sim::Task::group, split from the world as DeepSpeed builds its groups); MiCS partitions
// the states over its shard and all-reduces each bucket's gradient partition across the replica
// group at the boundary (all_reduce of stage 3); hpZ keeps a secondary partition of every
// non-persistent parameter over its group, filled when a gathered module is released, which
// gathers marked kSecondary read.
// Releases of gathered parameters follow the graph (a compute task whose end frees gathered
// parameters releases its module), as DeepSpeed's coordinator releases them.
//
// run() is called from several worker threads at once; the graph's dependencies order every pair
// of tasks that touch the same data, and the few shared structures (the IPG buffers) lock.
#ifndef ZPLAN_EXECUTOR_RANK_H_
#define ZPLAN_EXECUTOR_RANK_H_

#include <array>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "executor/executor.h"
#include "executor/layout.h"
#include "executor/swap.h"
#include "sim/step_builder.h"
#include "sim/zeropp_mics.h"

namespace zplan::executor {

class ExecutorRank {
 public:
  ExecutorRank(const models::Model& model, const hardware::Cluster& cluster,
               const sim::DsConfig& config, const sim::Workload& workload,
               const sim::StepBuilder& builder, ExecutorDevice& device, MemoryTracker& tracker,
               const ExecuteOptions& options);
  ~ExecutorRank();

  // Before micro-step `ms` of optimizer step `step` (counted from 0 over the run), or its
  // optimizer step (ms = -1), whose graph is `graph` (kept until end_micro_step).
  void begin_micro_step(int step, int ms, const sim::StepGraph& graph);
  // Task `id` of the current graph; called from its resource's worker.
  void run(sim::TaskId id, const sim::Task& task);
  void end_micro_step();
  // Dependencies the current graph leaves implicit and the executor needs, as (before, after):
  // hpZ's gather of a secondary partition made by a release in this graph runs after the
  // compute task that releases (DeepSpeed releases in the forward's post-hook before the next
  // hook fetches; the graph lets the prefetch start earlier, which only the timing can show).
  const std::vector<std::pair<sim::TaskId, sim::TaskId>>& extra_dependencies() const {
    return extra_deps_;
  }

  // Sum of squared errors of this rank's forward passes since the last call, and the number of
  // elements they covered.
  std::pair<double, double> take_loss();
  // The full parameters in model order (collective: every rank calls it).
  std::vector<float> full_weights();
  std::string swap_description() const;

 private:
  struct Ipg;
  int channel(const sim::Task& t) const { return static_cast<int>(t.resource); }
  // The communicator of task t's collective (its group), and of group `id`.
  kernels::Comm& comm_of(const sim::Task& t) { return group_comm(t.group); }
  kernels::Comm& group_comm(sim::CommGroupId id);
  bool offload() const;
  float* param_data(int id, sim::TaskId compute_task);
  float* grad_slot(int id);  // where backward writes param id's gradient

  // Compute.
  void forward(sim::TaskId id, const sim::Task& t);
  void backward(sim::TaskId id, const sim::Task& t);
  void forward_mlp(sim::TaskId id, int layer);
  void backward_mlp(sim::TaskId id, int piece, int layer);
  void forward_generic(sim::TaskId id, int piece);
  // Whether `piece` starts its layer (the generic models allocate the layer's activations then).
  bool first_piece_of_layer(int piece) const;
  void backward_generic(sim::TaskId id, int piece);
  void prepare_grads(int piece);
  void hook_grads(int piece);
  void release_gathered(sim::TaskId id, const sim::Task& t);

  // Stages 0-2.
  void bucket_copy(const sim::Task& t);
  void all_reduce(const sim::Task& t);
  void scatter_own(int bucket, const float* bucket_data, float* partition, float scale,
                   bool add);
  void grad_accumulate(const sim::Task& t);
  void h2d(sim::TaskId id, const sim::Task& t);
  void d2h(const sim::Task& t);
  void optimizer_gpu(const sim::Task& t);
  // What the planned GPU update allocates while it runs over `n` elements (torch's foreach Adam:
  // its denominator, sim::OptimizerConfig::gpu_step_transient_bytes), held for the length of
  // this rank's own update so that its memory is the simulator's; empty for a fused update.
  Buffer update_scratch(size_t n);
  void optimizer_cpu(const sim::Task& t);
  void all_gather(sim::TaskId id, const sim::Task& t);
  void nvme_read(sim::TaskId id, const sim::Task& t);
  void nvme_write(const sim::Task& t);

  // Stage 3 helpers.
  void gather_module(sim::TaskId id, const sim::Task& t);
  void gather_persistent(const sim::Task& t);
  // MiCS's gathers (mics.py): the flat one into each parameter's own buffer, and the two hops
  // of the hierarchical one.
  void gather_mics(sim::TaskId id, const sim::Task& t, const std::vector<int>& ids);
  // How a gather splits each parameter: into `n` pieces of piece(slot) elements, this rank's
  // piece number `me`, over `comm` -- the partition group's pieces (part_numel), or hpZ's
  // secondary ones (part_numel x partition ranks / hpz).
  struct Pieces {
    kernels::Comm* comm = nullptr;
    int n = 1;
    int me = 0;
    bool secondary = false;  // hpZ's pieces, read from the secondary partition
    int64_t per_part = 1;    // piece = part_numel * per_part
    int64_t piece(const ParamSlot& s) const { return s.part_numel * per_part; }
  };
  Pieces pieces(const sim::Task& t);
  // all_gather_coalesced of the parameters `ids` (`block` = the sum of their pieces): this
  // rank's pieces, read from `local` in order (null: from params_, or from the secondary
  // partition), into its block of a flat buffer of every rank's blocks, then all-gathered on
  // `channel`.
  Buffer gather_flat(int channel, const Pieces& pc, const std::vector<int>& ids, int64_t block,
                     const float* local);
  // The torch.cat copy: parameter `pid`'s whole tensor into `out`, from each rank's block of
  // `flat` at offset `at` (its place among the gathered pieces).
  void unflatten_param(const Pieces& pc, const Buffer& flat, int64_t block, int64_t at, int pid,
                       float* out);
  // hpZ (partition_parameters.py _partition_param_sec): parameter `pid`'s secondary piece from
  // its whole tensor `full`, unless it is already there in this optimizer step.
  void fill_secondary(int pid, const float* full);
  void reduce_scatter(const sim::Task& t);
  // Copies bucket b's reduced slices (at the start of its interleaved buffer) into `dst`
  // (partition-indexed), scaled; add = accumulate.
  void unpack_slices(int bucket, const float* src, float* dst, float scale, bool add);

  // Stages 1-2 with offload: the reduced bucket, and releasing it after the host copies.
  const float* reduced_bucket(int b);
  void done_with_reduced(int b);
  // NVMe gradient writes: bucket b's byte range in the gradient region, and its staging.
  struct SwapRange {
    uint64_t begin = 0, end = 0, a0 = 0, a1 = 0;  // exact and aligned
  };
  SwapRange swap_range(int b) const;
  float* stage_for_nvme(int b);

  void init_state();
  void init_data(int step, int ms);
  // `count` floats of untracked device memory set to `host` (or to `value` when host is null).
  UntrackedBuffer to_device(size_t count, const float* host, float value = 0.0f);
  sim::TaskId predecessor(sim::TaskId id, sim::TaskKind kind) const;

  const models::Model& model_;
  const hardware::Cluster& cluster_;
  const sim::DsConfig& config_;
  const sim::Workload& workload_;
  const sim::StepBuilder& builder_;
  ExecutorDevice& dev_;
  MemoryTracker& mem_;
  ExecuteOptions options_;
  const sim::ZeroGroups zgroups_;  // ZeRO++ / MiCS groups (sim/zeropp_mics.h)
  ExecutorLayout layout_;         // over the partition group
  sim::ActivationPlan acts_;
  kernels::Comm& comm_;
  const int dp_;    // data-parallel ranks (the world)
  const int rank_;  // this rank in the world
  // The communicators of hpZ's and MiCS's groups, by sim::CommGroupId (null: the world's).
  std::array<std::unique_ptr<kernels::Comm>, sim::kNumCommGroups> group_comms_;
  const int stage_;
  const int gas_;
  const bool mlp_;
  int64_t tokens_ = 0;  // rows of one micro-batch: micro_batch x seq_len

  // Current micro-step.
  const sim::StepGraph* graph_ = nullptr;
  std::vector<std::vector<sim::TaskId>> preds_;
  std::vector<std::pair<sim::TaskId, sim::TaskId>> extra_deps_;
  // Whether compute task `id` releases the module its gather brought (release_gathered).
  bool releases_gathered(const sim::Task& t) const;
  int step_ = 0;
  int ms_ = 0;
  bool first_ = false;
  bool boundary_ = false;
  int64_t adam_step_ = 0;
  bool fail_now_ = false;

  // Model states.
  Buffer params_;        // stages 0-2: the flat parameters (padded); stage 3: this partition
  std::vector<Buffer> persistent_full_;    // stage 3: full persistent params, by param id
  Buffer master_;        // stages 1-2 fp32 master partition (device or pinned host)
  Buffer exp_avg_;       // Adam m and v: device, or pageable host with CPU offload
  Buffer exp_avg_sq_;
  std::vector<Buffer> master_g_;    // stage 3: per sub-group (device or pinned host)
  std::vector<Buffer> exp_avg_g_;
  std::vector<Buffer> exp_avg_sq_g_;
  std::vector<Buffer> full_grads_;  // stages 0-1: full gradients by param id
  std::vector<Buffer> fresh_grads_;  // stages 2-3: autograd's gradients until the hook
  std::unique_ptr<Ipg> ipg_;
  Buffer partition_acc_;  // stages 1-2 grads_in_partition (accumulated), stage 3 grad partition
  Buffer partition_new_;  // stage 2, micro-steps after the first: this micro-step's partition
  Buffer& reduce_target();
  std::vector<Buffer> bucket_tmp_;   // per bucket: flattened / interleaved, until consumed
  std::vector<Buffer> bucket_dev_;   // per bucket: the offload round trip's device copy
  // Per bucket: fp32 gradients on their way to NVMe, in a swap buffer (or a fallback buffer).
  struct StageSlot {
    int buffer = -1;
    Buffer fallback;
    float* data = nullptr;  // the staging area: bytes [a0, a1) of the gradient region
  };
  std::vector<StageSlot> bucket_stage_;
  struct FreeDeleter {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, FreeDeleter> bounce_;  // one aligned block for partial-block reads
  // Offload (host side).
  Buffer host_grads32_;   // stages 1-2: fp32 gradient partition; stage 3: per sub-group below
  std::vector<Buffer> host_grads32_g_;
  Buffer host_params16_;  // stages 1-2: param_buffer_of_bit16_for_cpu_offload_groups
  Buffer host_temp_grad_;  // stages 1-2: temp_grad_buffer_for_cpu_offload
  Buffer host_accum_;     // stages 1-2 with gas > 1: accumulated_grads_in_cpu
  // Stage 1-3 GPU optimizer: the flat 16-bit copy and the fp32 gradients of the step.
  Buffer step_flat_;
  Buffer step_grad32_;
  bool step_prepared_ = false;  // the step's flatten (and cast) task ran; its Adam task is next
  // Stage 3: gathered parameters by the gather task that made them, and partitions copied to
  // the device for a gather (offload_param).
  std::map<sim::TaskId, std::vector<Buffer>> gathered_;
  std::map<sim::TaskId, Buffer> fetched_;
  std::mutex gathered_mu_;
  // hpZ: the secondary partition (every non-persistent parameter's piece, in model order) and,
  // per parameter, its offset there and whether it holds this optimizer step's values.
  Buffer secondary_;
  std::vector<int64_t> secondary_offset_;
  std::vector<bool> secondary_valid_;
  // NVMe optimizer swap (stage 3).
  std::unique_ptr<SwapFile> swap_;
  std::vector<uint64_t> swap_state_offset_;  // per sub-group: fp32 params, m, v (aligned each)
  std::vector<uint64_t> swap_grad_offset_;   // per bucket: its fp32 slices
  std::vector<size_t> swap_state_bytes_;
  std::vector<Buffer> swap_buffers_;         // buffer_count pinned buffers of the largest group
  struct SwapSet {
    int first_buffer = 0;
    int users = 0;  // tasks still to use it (adam, write-back, h2d)
  };
  std::map<int, SwapSet> swap_sets_;  // sub-group -> its set of 4 buffers
  std::mutex swap_mu_;
  std::condition_variable swap_cv_;
  std::vector<bool> swap_buffer_busy_;

  // Activations (MLP: real tensors; other models: the activation plan's bytes). The synthetic
  // data is made on the host and copied to the device.
  std::vector<float> input_host_;
  std::vector<float> target_host_;
  UntrackedBuffer input_;
  UntrackedBuffer target_;
  std::vector<Buffer> act_;
  Buffer grad_flow_;
  std::vector<Buffer> act_blob_;
  // Operands of the generic models' GEMMs: data whose bytes the activation plan counts, so not
  // tracked again.
  UntrackedBuffer scratch_a_, scratch_b_, scratch_w_;
  double loss_sq_ = 0;
  double loss_n_ = 0;
};

}  // namespace zplan::executor

#endif  // ZPLAN_EXECUTOR_RANK_H_
