// Stages 0-2's backward (StepBuilder::SimpleBackward): gradients into reduce_bucket_size buckets,
// their all-reduce (or reduce) and the copies around it, the backward epilogue. Stage 3's
// forward and backward are in step_builder_stage3.cc, the rest in step_builder.cc.
// "ref §x" = reference/deepspeed_internals.md.
#include <algorithm>
#include <vector>

#include "hardware/cost_model.h"
#include "sim/step_builder.h"
#include "sim/step_builder_internal.h"

namespace zplan::sim {

using hardware::Collective;

// The backward of stages 0-2 in one build: each piece's recompute and backward, from the last
// piece down; its gradients filling reduce_bucket_size buckets in the order backward produces
// them; the buckets' reductions; then the epilogue (stage 2's accumulation, stage 0's
// all-reduce). What the build keeps track of between pieces is members.
class StepBuilder::SimpleBackward {
 public:
  SimpleBackward(const StepBuilder& builder, Ctx& c);
  void run();

 private:
  // The recompute (before a checkpointed layer's last piece) and the backward of piece `pi`,
  // with their memory; returns the backward task.
  TaskId add_piece(size_t pi);
  // Piece `pc`'s gradients, produced by task `b`, into the buckets; a bucket that starts filling
  // waits for its buffer.
  void bucket_gradients(const Piece& pc, TaskId b);
  void on_full(const PendingBucket& bucket);
  void reduce_bucket(const PendingBucket& bucket);
  // Offload: the reduced bucket's slices go to the host after `reduced`.
  void copy_to_host(const PendingBucket& bucket, TaskId reduced);
  // The partly filled bucket, the deferred ones, and the IPG buffers' release.
  void finish_buckets();
  // Stage 2 after the first micro-step: the new partition added into the accumulated one.
  void accumulate_partition();
  // Stage 0 at the boundary: buffered_allreduce_fallback.
  void allreduce_stage0();
  // BF16_Optimizer after every backward: the 16-bit gradients added into the fp32 buffer.
  void bf16_accumulate();
  // BF16_Optimizer at the boundary: the fp32 buffer all-reduced in the training dtype.
  void allreduce_bf16();

  const StepBuilder& sb_;
  Ctx& c_;
  const ZeroConfig& z_;
  const double p_;  // model dtype bytes
  const double a_;  // gradient-accumulation dtype bytes
  const double P_;  // partition elements
  const bool offload_;
  const bool gas_;
  const bool bf16_;  // stage 1 runs BF16_Optimizer (uses_bf16_optimizer): no ZeRO buckets
  // Stage 1 reduces at the boundary only; stage 2 every micro-step (engine.allreduce_gradients,
  // ref §4.2). Stage 0 all-reduces after backward, at the boundary.
  const bool bucketed_;
  // Stage 1 without overlap_comm reduces after the whole backward (reduce_gradients); stage 2
  // reduces from the hooks, on the compute stream when overlap_comm is off.
  const bool after_backward_;
  const Resource stream_;
  // IPG buffers (setup_buckets, ref §2.1 item 4): doubled with overlap_comm, which alternates
  // them, so a bucket's buffer is refilled two buckets later.
  const double ipg_bytes_;
  const int reuse_distance_;
  Bucketer bucketer_;
  std::vector<PendingBucket> deferred_;
  bool partition_allocated_ = false;
  // The task whose end frees the IPG buffer of the last bucket reduced: the reduction itself, or
  // with offload the copies to the host that read the reduced bucket from it (ref §5.1).
  TaskId ipg_freed_by_ = kNoTaskId;
  bool first_backward_ = true;
};

StepBuilder::SimpleBackward::SimpleBackward(const StepBuilder& builder, Ctx& c)
    : sb_(builder),
      c_(c),
      z_(builder.config_.zero),
      p_(builder.sizes_.param_bytes),
      a_(builder.sizes_.grad_accum_bytes),
      P_(builder.sizes_.partition),
      offload_(z_.offload_optimizer.device != OffloadDevice::kNone),
      gas_(builder.config_.gradient_accumulation_steps > 1),
      bf16_(uses_bf16_optimizer(builder.config_)),
      bucketed_(!bf16_ && ((z_.stage == 2) || (z_.stage == 1 && c.boundary))),
      after_backward_(z_.stage == 1 && !z_.overlap_comm),
      stream_(z_.overlap_comm ? Resource::kReduceStream : Resource::kCompute),
      ipg_bytes_(z_.contiguous_gradients
                     ? p_ * builder.sizes_.bucket * (z_.overlap_comm ? 2 : 1)
                     : 0),
      reuse_distance_((z_.overlap_comm && z_.contiguous_gradients) ? 2 : 1),
      bucketer_(builder.sizes_.bucket) {}

void StepBuilder::SimpleBackward::run() {
  for (size_t pi = sb_.pieces_.size(); pi-- > 0;) {
    const TaskId b = add_piece(pi);
    if (bucketed_) bucket_gradients(sb_.pieces_[pi], b);
  }
  if (bucketed_) finish_buckets();
  if (z_.stage == 2 && !offload_ && !c_.first) accumulate_partition();
  if (z_.stage == 0 && c_.boundary) allreduce_stage0();
  if (bf16_) {
    bf16_accumulate();
    if (c_.boundary) allreduce_bf16();
  }
}

TaskId StepBuilder::SimpleBackward::add_piece(size_t pi) {
  const Piece& pc = sb_.pieces_[pi];
  const int layer = pc.layer;
  const Tier gpu = Tier::kGpu;
  const bool last_piece = static_cast<int>(pi) == sb_.layer_first_piece_[layer];
  if (sb_.acts_.checkpointed[layer] &&
      static_cast<int>(pi) + 1 == sb_.layer_first_piece_[layer + 1]) {
    TaskId h2d = sb_.add_recompute(c_, layer, c_.last_compute);
    TaskId rc = sb_.add_compute(c_, TaskKind::kRecompute, static_cast<int>(pi));
    if (h2d != kNoTaskId) c_.g->depend(rc, h2d);
    sb_.add_forward_memory(c_, rc, layer, /*recompute=*/true);
  }
  TaskId b = sb_.add_compute(c_, TaskKind::kBackward, static_cast<int>(pi));
  c_.last_compute = b;
  if (first_backward_ && bucketed_) {
    // The first gradient hook of a backward allocates the IPG buffers.
    c_.g->effect(b, false, gpu, Category::kBuckets, ipg_bytes_);
  }
  first_backward_ = false;
  sb_.add_backward_memory(c_, b, layer, last_piece);
  double piece_grads = 0;
  for (double e : pc.grads) piece_grads += e;
  if (z_.stage <= 1) {
    // Full 16-bit gradients kept to the step (stage 1 frees them in step(), stage 0 in
    // zero_grad); later micro-steps accumulate into the same tensors (the baseline).
    if (c_.first) c_.g->effect(b, false, gpu, Category::kGrads, p_ * piece_grads);
  } else {
    // Stage 2: autograd's gradient lives until the hook copies it into the bucket (below).
    c_.g->effect(b, false, gpu, Category::kGrads, p_ * piece_grads);
  }
  return b;
}

void StepBuilder::SimpleBackward::bucket_gradients(const Piece& pc, TaskId b) {
  // A gradient that overflows the bucket waits, allocated, until the full bucket has left the
  // IPG buffer (the hook runs reduce_ipg_grads() before its copy, ref §2.1 item 4); so do the
  // piece's later gradients. With overlap_comm the other IPG buffer takes it at once (the wait
  // for that buffer is the dependency below).
  const Tier gpu = Tier::kGpu;
  double copied = 0, waiting = 0;
  for (double e : pc.grads) {
    const TaskId freed_before = ipg_freed_by_;
    bucketer_.add(e, b, [this](const PendingBucket& full) { on_full(full); });
    if (waiting > 0 || (ipg_freed_by_ != freed_before && reuse_distance_ == 1)) {
      waiting += e;
    } else {
      copied += e;
    }
  }
  if (z_.stage == 2) {
    c_.g->effect(b, true, gpu, Category::kGrads, -p_ * copied);
    if (waiting > 0) c_.g->effect(ipg_freed_by_, true, gpu, Category::kGrads, -p_ * waiting);
  }
  // A bucket that started filling here waits until the reduction that last used its buffer
  // has ended -- unless that reduction was issued by this same piece (a finer graph would
  // order them inside it).
  for (const PendingBucket& started : bucketer_.take_started()) {
    int prev = started.index - reuse_distance_;
    if (after_backward_ || prev < 0 || prev >= static_cast<int>(c_.bucket_reduced.size())) {
      continue;
    }
    TaskId r = c_.bucket_reduced[prev];
    if (r != kNoTaskId && r < b) c_.g->depend(b, r);
  }
}

void StepBuilder::SimpleBackward::on_full(const PendingBucket& bucket) {
  if (after_backward_) {
    deferred_.push_back(bucket);
  } else {
    reduce_bucket(bucket);
  }
}

void StepBuilder::SimpleBackward::reduce_bucket(const PendingBucket& bucket) {
  const Tier gpu = Tier::kGpu;
  const double bytes = p_ * bucket.elems;
  const int gpus = sb_.dp_;
  Task t;
  if (z_.use_multi_rank_bucket_allreduce || !z_.reduce_scatter) {
    // The whole bucket is all-reduced; each rank then keeps its slices (average_tensor).
    t = sb_.collective_task(TaskKind::kAllReduce, stream_, Collective::kAllReduce, bytes);
  } else {
    // One dist.reduce per owner: data moves as in a reduce-scatter, with a launch per rank.
    t = sb_.collective_task(TaskKind::kReduce, stream_, Collective::kReduceScatter, bytes);
    t.latency_s *= gpus;
  }
  // The copies around the collective, each a read and a write, short kernels on the same
  // stream counted into the task as fixed time: stage 1's hooks run now and copy the kept
  // gradients into the IPG buffer (a tensor larger than the bucket goes straight to the flat
  // copy); allreduce_bucket flattens the bucket (ref §2.1 item 5); then each rank keeps its
  // averaged slices in grads_in_partition, or with offload the reduced bucket goes back into
  // the IPG buffer that the host copies read (ref §5.1).
  double copied = bytes;
  if (z_.stage == 1 && bucket.elems <= sb_.sizes_.bucket) copied += bytes;
  copied += offload_ ? bytes : bytes / gpus;
  t.latency_s += hardware::memory_bound_time_s(sb_.cluster_.profile.gpu, 2 * copied);
  TaskId r = sb_.place(c_, t, -1, bucket.index, bucket.closer);
  if (c_.bucket_reduced.size() <= static_cast<size_t>(bucket.index)) {
    c_.bucket_reduced.resize(bucket.index + 1, kNoTaskId);
  }
  c_.bucket_reduced[bucket.index] = r;
  // allreduce_bucket flattens the slices it reduces (ref §2.1 item 5).
  c_.g->effect(r, false, gpu, Category::kBuckets, bytes);
  c_.g->effect(r, true, gpu, Category::kBuckets, -bytes);
  if (!offload_ && !partition_allocated_) {
    // grads_in_partition, allocated on first use in a backward (ref §2.1 item 6).
    partition_allocated_ = true;
    c_.g->effect(r, false, gpu, Category::kGrads, a_ * P_);
  }
  if (offload_) {
    copy_to_host(bucket, r);
  } else {
    ipg_freed_by_ = r;
  }
  c_.last_reduction = r;
}

void StepBuilder::SimpleBackward::copy_to_host(const PendingBucket& bucket, TaskId reduced) {
  const double slice = bucket.elems / sb_.dp_;
  if (c_.boundary) {
    // async_inplace_copy_grad_to_fp32_buffer_from_gpu: the slice in the master dtype (fp32, or
    // 16-bit master weights' own) to pinned host memory (ref §5.1).
    ipg_freed_by_ = sb_.place(c_, sb_.offload_copy_task(TaskKind::kD2H,
                                                        sb_.config_.optimizer.master_bytes() * slice),
                              -1,
                              bucket.index, reduced);
  } else if (gas_) {
    // Non-boundary micro-steps round-trip the 16-bit slice through accumulated_grads_in_cpu.
    TaskId ht = sb_.place(c_, sb_.offload_copy_task(TaskKind::kH2D, p_ * slice), -1,
                          bucket.index, reduced);
    ipg_freed_by_ = sb_.place(c_, sb_.offload_copy_task(TaskKind::kD2H, p_ * slice), -1,
                              bucket.index, ht);
  }
}

void StepBuilder::SimpleBackward::finish_buckets() {
  bucketer_.flush([this](const PendingBucket& full) { on_full(full); });
  for (const PendingBucket& bucket : deferred_) reduce_bucket(bucket);
  // The backward epilogue releases the IPG buffers (_release_ipg_buffers).
  if (c_.last_reduction != kNoTaskId) {
    c_.g->effect(c_.last_reduction, true, Tier::kGpu, Category::kBuckets, -ipg_bytes_);
  }
}

void StepBuilder::SimpleBackward::accumulate_partition() {
  // Later micro-steps add the new partition into the accumulated one (all_grad_tensors) and
  // drop the new one (ref §2.1 item 6).
  TaskId at = sb_.place(
      c_, sb_.memory_task(TaskKind::kGradAccumulate, Resource::kCompute, 3 * a_ * P_), -1, -1,
      c_.last_reduction);
  c_.g->effect(at, true, Tier::kGpu, Category::kGrads, -a_ * P_);
  c_.last_reduction = at;
}

void StepBuilder::SimpleBackward::allreduce_stage0() {
  // buffered_allreduce_fallback: flatten and all-reduce MEMORY_OPT_ALLREDUCE_SIZE pieces on
  // the compute stream after backward (engine.py, ref §4.2).
  const Tier gpu = Tier::kGpu;
  // _get_gradients_for_reduction skips parameters without requires_grad: trainable ones only.
  double left = sb_.sizes_.train_psi;
  int index = 0;
  while (left > 0) {
    const double elems = std::min(left, kStage0AllreduceElems);
    left -= elems;
    TaskId ft = sb_.place(
        c_, sb_.memory_task(TaskKind::kBucketCopy, Resource::kCompute, 2 * p_ * elems), -1,
        index, kNoTaskId);
    c_.g->effect(ft, false, gpu, Category::kBuckets, p_ * elems);
    Task ar = sb_.collective_task(TaskKind::kAllReduce, Resource::kCompute,
                                  Collective::kAllReduce, p_ * elems);
    // allreduce_and_copy copies the averaged result back into the gradients (read + write).
    ar.latency_s += hardware::memory_bound_time_s(sb_.cluster_.profile.gpu, 2 * p_ * elems);
    TaskId at = sb_.place(c_, ar, -1, index++, kNoTaskId);
    c_.g->effect(at, true, gpu, Category::kBuckets, -p_ * elems);
    c_.last_reduction = at;
  }
}

void StepBuilder::SimpleBackward::bf16_accumulate() {
  // The engine's backward epilogue calls BF16_Optimizer.update_hp_grads (immediate_grad_update
  // is off by default, precision_config.py): hp_grad.add_(lp.grad.to(fp32)) per parameter, a cast
  // (read p, write a) and an add (read 2a, write a); then the next backward's prologue zeroes the
  // 16-bit gradients (clear_lp_grads: write p), counted here for the micro-steps that follow one.
  const double elems = sb_.sizes_.train_psi;
  const double bytes = (p_ + 4 * a_ + (c_.boundary ? 0 : p_)) * elems;
  c_.last_reduction = sb_.place(
      c_, sb_.memory_task(TaskKind::kGradAccumulate, Resource::kCompute, bytes), -1, -1,
      c_.last_compute);
}

void StepBuilder::SimpleBackward::allreduce_bf16() {
  // engine.allreduce_gradients at stage 1 without reduce_gradients: buffered_allreduce_fallback
  // over BF16_Optimizer.get_grads_for_reduction(), the flat fp32 buffer. allreduce_no_retain
  // takes the one tensor whole (it closes a bucket only after adding a tensor), allreduce_bucket
  // casts it to communication_data_type (the training dtype: read a, write p), all-reduces that
  // on the compute stream and copies it back (read p, write a) (engine.py).
  const Tier gpu = Tier::kGpu;
  const double elems = P_ * sb_.cluster_.gpus;
  TaskId ct = sb_.place(
      c_, sb_.memory_task(TaskKind::kBucketCopy, Resource::kCompute, (a_ + p_) * elems), -1, 0,
      c_.last_reduction);
  c_.g->effect(ct, false, gpu, Category::kBuckets, p_ * elems);
  Task ar = sb_.collective_task(TaskKind::kAllReduce, Resource::kCompute, Collective::kAllReduce,
                                p_ * elems);
  ar.latency_s += hardware::memory_bound_time_s(sb_.cluster_.profile.gpu, (a_ + p_) * elems);
  TaskId at = sb_.place(c_, ar, -1, 0, ct);
  c_.g->effect(at, true, gpu, Category::kBuckets, -p_ * elems);
  c_.last_reduction = at;
}

void StepBuilder::build_backward_simple(Ctx& c) const { SimpleBackward(*this, c).run(); }

}  // namespace zplan::sim
