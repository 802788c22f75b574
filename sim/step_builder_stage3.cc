// Stage 3's forward and backward: parameter fetches, their prefetch and release, and the
// reduce-scatter of gradient buckets. "ref §x" = reference/deepspeed_internals.md.
#include <algorithm>
#include <limits>
#include <vector>

#include "hardware/cost_model.h"
#include "sim/step_builder.h"
#include "sim/step_builder_internal.h"

namespace zplan::sim {

namespace {

// How many fetches the all-gather stream may run ahead of the module being computed. DeepSpeed's
// coordinator lets at most __max_ongoing_fetch_events = 2 gathers be outstanding before it
// synchronizes on the oldest (partitioned_param_coordinator.py, ref §2.2 item 8); the prefetch
// bucket can take it further. [est: the CPU runs ahead of the GPU, so in effect gathers are
// issued that many modules ahead of the compute that needs them]
constexpr int kFetchLookahead = 2;

}  // namespace

double StepBuilder::inert_prefetch_window(const ZeroSizes& sizes) {
  // A window below kFetchLookahead + 1 times the smallest fetch holds no kFetchLookahead + 1
  // consecutive fetches, so the reach computed in build_stage3 stays kFetchLookahead.
  double smallest = 0;
  for (const std::vector<double>& layer : sizes.module_fetch) {
    for (double f : layer) {
      if (f > 0 && (smallest == 0 || f < smallest)) smallest = f;
    }
  }
  if (smallest == 0) return std::numeric_limits<double>::infinity();
  return (kFetchLookahead + 1) * smallest;
}

// Stage 3's forward and backward in one build: the uses of every piece's module in compute
// order, a gather issued for each use that does not find its module still gathered (prefetched
// up to the reach the prefetch window allows, released unless reused soon), and the gradient
// buckets' reduce-scatter. What the build keeps track of between uses is members.
class StepBuilder::Stage3Pass {
 public:
  Stage3Pass(const StepBuilder& builder, Ctx& c);
  void run();

 private:
  struct Use {
    int piece = 0;
    TaskKind kind = TaskKind::kForward;
    double fetch = 0;  // elements its module gathers (0: nothing to gather)
    int module_key = -1;
  };
  Use use_of(int piece, TaskKind kind) const;
  // The compute of this micro-step in order: forward pieces, then per layer from the last: its
  // recompute (forward order) under checkpointing, then its backward pieces (reverse order).
  void plan_uses();
  // A module stays gathered after a use when its next use comes within max_reuse_distance
  // elements of fetches (__params_to_release, ref §2.2 item 8).
  void plan_releases();
  // The gather use `u` waits for: none, the one still holding its module, or a new one.
  TaskId gather_for(size_t u);
  TaskId issue_gather(size_t u);
  // Prefetch reach of the next gather (of `fetch` elements), counted in gathers.
  int prefetch_reach(double fetch) const;
  // offload_param: the partition comes from pinned host memory (or NVMe first) and is copied to
  // the GPU before the all-gather; returns the last copy, or `after` without offload.
  TaskId fetch_partition(const Piece& pc, double part_bytes, TaskId after);
  // Use `u`'s compute task after `gather`, its memory, and the release of its module.
  void add_use(size_t u, TaskId gather);
  // A backward piece's gradients, produced by task `t`, into the bucket.
  void add_gradients(const Piece& pc, TaskId t);
  void reduce_bucket(const PendingBucket& bucket);
  // Optimizer offload: the reduced partition to the host after `reduced` (ref §5.2).
  void offload_gradients(const PendingBucket& bucket, TaskId reduced);

  const StepBuilder& sb_;
  Ctx& c_;
  const ZeroConfig& z_;
  const double p_;  // model dtype bytes
  const double a_;  // gradient-accumulation dtype bytes
  const double n_;  // ranks
  const bool offload_;
  const OffloadDevice param_dev_;
  const Resource ag_stream_;
  const Resource rs_stream_;
  // Prefetch reach, counted in gathers: kFetchLookahead, or more when the coming gathers fit the
  // prefetch bucket (capped by stage3_max_live_parameters).
  const double window_;
  std::vector<Use> uses_;
  std::vector<bool> keep_after_;  // per use: its module stays gathered after it
  std::vector<TaskId> compute_;   // per use: its compute task
  std::vector<size_t> gather_use_;  // consumer use of each gather, in order
  std::vector<double> gather_elems_;
  std::vector<TaskId> available_;  // module -> gather holding it
  // hpZ: module -> released once in this micro-step, so that it has a secondary partition.
  std::vector<bool> released_;
  Bucketer bucketer_;
  std::vector<TaskId> bucket_copy_;  // the interleave copy of each bucket (frees the IPG buffer)
};

StepBuilder::Stage3Pass::Stage3Pass(const StepBuilder& builder, Ctx& c)
    : sb_(builder),
      c_(c),
      z_(builder.config_.zero),
      p_(builder.sizes_.param_bytes),
      a_(builder.sizes_.grad_accum_bytes),
      n_(builder.sizes_.dp),  // the partition group: every rank, or the MiCS shard
      offload_(z_.offload_optimizer.device != OffloadDevice::kNone),
      param_dev_(z_.offload_param.device),
      ag_stream_(z_.overlap_comm ? Resource::kGatherStream : Resource::kCompute),
      rs_stream_(z_.overlap_comm ? Resource::kReduceStream : Resource::kCompute),
      window_(std::min(static_cast<double>(z_.prefetch_bucket_size),
                       static_cast<double>(z_.max_live_parameters))),
      available_(builder.module_count_, kNoTaskId),
      released_(builder.module_count_, false),
      bucketer_(builder.sizes_.bucket,
                builder.groups_.qgz ? builder.qgz_vector_limit() : 0.0) {}

void StepBuilder::Stage3Pass::run() {
  plan_uses();
  plan_releases();
  compute_.assign(uses_.size(), kNoTaskId);
  for (size_t u = 0; u < uses_.size(); ++u) add_use(u, gather_for(u));
  bucketer_.flush([this](const PendingBucket& full) { reduce_bucket(full); });
}

StepBuilder::Stage3Pass::Use StepBuilder::Stage3Pass::use_of(int piece, TaskKind kind) const {
  Use u;
  u.piece = piece;
  u.kind = kind;
  const Piece& pc = sb_.pieces_[piece];
  if (pc.fetch_module >= 0) {
    u.fetch = sb_.sizes_.module_fetch[pc.layer][pc.fetch_module];
    u.module_key = sb_.module_base_[pc.layer] + pc.fetch_module;
  }
  return u;
}

void StepBuilder::Stage3Pass::plan_uses() {
  for (size_t pi = 0; pi < sb_.pieces_.size(); ++pi) {
    uses_.push_back(use_of(static_cast<int>(pi), TaskKind::kForward));
  }
  const int n_layers = static_cast<int>(sb_.model_.layers().size());
  for (int layer = n_layers; layer-- > 0;) {
    // A layer no gradient reaches has no backward, so no backward gather either: DeepSpeed's
    // pre-backward hooks fire only in backward (models/finetune.h, Layer::no_grad).
    if (sb_.model_.layers()[layer].no_grad) continue;
    const int begin = sb_.layer_first_piece_[layer], end = sb_.layer_first_piece_[layer + 1];
    if (sb_.acts_.checkpointed[layer]) {
      for (int pi = begin; pi < end; ++pi) uses_.push_back(use_of(pi, TaskKind::kRecompute));
    }
    for (int pi = end; pi-- > begin;) uses_.push_back(use_of(pi, TaskKind::kBackward));
  }
}

void StepBuilder::Stage3Pass::plan_releases() {
  const size_t n_uses = uses_.size();
  keep_after_.assign(n_uses, false);
  // Index of each module's next use, scanning backwards (kNone: not used again).
  constexpr size_t kNone = static_cast<size_t>(-1);
  std::vector<size_t> next_use(sb_.module_count_, kNone);
  std::vector<double> fetched_before(n_uses + 1, 0);
  for (size_t u = 0; u < n_uses; ++u) fetched_before[u + 1] = fetched_before[u] + uses_[u].fetch;
  for (size_t u = n_uses; u-- > 0;) {
    if (uses_[u].fetch <= 0) continue;
    size_t next = next_use[uses_[u].module_key];
    if (next != kNone) {
      double between = fetched_before[next] - fetched_before[u + 1];
      keep_after_[u] = between < static_cast<double>(z_.max_reuse_distance);
    }
    next_use[uses_[u].module_key] = u;
  }
}

TaskId StepBuilder::Stage3Pass::gather_for(size_t u) {
  const Use& use = uses_[u];
  if (use.fetch <= 0) return kNoTaskId;
  // Still gathered from an earlier use?
  if (available_[use.module_key] != kNoTaskId) return available_[use.module_key];
  return issue_gather(u);
}

int StepBuilder::Stage3Pass::prefetch_reach(double fetch) const {
  const size_t q = gather_use_.size();
  int reach = kFetchLookahead;
  double sum = fetch;
  for (size_t r = q; r-- > 0;) {
    sum += gather_elems_[r];
    if (sum > window_) break;
    reach = std::max(reach, static_cast<int>(q - r) + 1);
  }
  return reach;
}

TaskId StepBuilder::Stage3Pass::issue_gather(size_t u) {
  const Use& use = uses_[u];
  const Piece& pc = sb_.pieces_[use.piece];
  const Tier gpu = Tier::kGpu;
  // Issue point: the gather may start once compute has reached the use `reach` gathers back
  // (its preceding compute task has ended).
  const size_t q = gather_use_.size();
  const int reach = prefetch_reach(use.fetch);
  TaskId issue_after = kNoTaskId;
  if (static_cast<int>(q) >= reach) {
    size_t issue_use = gather_use_[q - reach];
    if (issue_use > 0) issue_after = compute_[issue_use - 1];
  }
  gather_use_.push_back(u);
  gather_elems_.push_back(use.fetch);
  const double part_bytes = p_ * use.fetch / n_;
  TaskId before = fetch_partition(pc, part_bytes, issue_after);
  // The all-gather with its copies (ZeRO-3: this rank's partition into the flat buffer before
  // it and the per-parameter torch.cat out of it after, ref §2.2 item 8), or ZeRO++'s and
  // MiCS's forms of it (step_builder_zeropp.cc). ZeRO++ hpZ: a module gathered and released
  // before in this step has its secondary partition (made on release, kept until step()
  // ends), and the gather runs inside the hpZ group (partition_parameters.py
  // all_gather_coalesced, use_secondary_tensor).
  const bool secondary = z_.hpz() && (!c_.first || released_[use.module_key]);
  TaskId first = kNoTaskId, gather = before;
  for (const Task& t : sb_.param_gather_tasks(ag_stream_, use.fetch, secondary)) {
    gather = sb_.place(c_, t, pc.layer, pc.fetch_module, gather);
    if (first == kNoTaskId) first = gather;
  }
  // The gathered parameters and the gather's own buffers (the flat output of ZeRO-3, dropped
  // when the gather completes), gather_transient_bytes.
  const double transient = gather_transient_bytes(z_, sb_.groups_, p_, use.fetch);
  c_.g->effect(first, false, gpu, Category::kGatheredParams, p_ * use.fetch + transient);
  c_.g->effect(gather, true, gpu, Category::kGatheredParams, -transient);
  if (param_dev_ != OffloadDevice::kNone) {
    c_.g->effect(gather, true, gpu, Category::kGatheredParams, -part_bytes);
  }
  available_[use.module_key] = gather;
  return gather;
}

TaskId StepBuilder::Stage3Pass::fetch_partition(const Piece& pc, double part_bytes,
                                                TaskId after) {
  // _all_gather_dtype, ref §5.2.
  TaskId before = after;
  if (param_dev_ == OffloadDevice::kNvme) {
    before = sb_.place(c_, sb_.copy_task(TaskKind::kNvmeRead, Resource::kNvmeRead, part_bytes),
                       pc.layer, pc.fetch_module, before);
  }
  if (param_dev_ != OffloadDevice::kNone) {
    before = sb_.place(c_, sb_.copy_task(TaskKind::kH2D, Resource::kH2D, part_bytes), pc.layer,
                       pc.fetch_module, before);
    c_.g->effect(before, false, Tier::kGpu, Category::kGatheredParams, part_bytes);
  }
  return before;
}

void StepBuilder::Stage3Pass::add_use(size_t u, TaskId gather) {
  const Use& use = uses_[u];
  const Piece& pc = sb_.pieces_[use.piece];
  const int layer = pc.layer;
  TaskId h2d = kNoTaskId;
  if (use.kind == TaskKind::kRecompute && use.piece == sb_.layer_first_piece_[layer]) {
    h2d = sb_.add_recompute(c_, layer, u > 0 ? compute_[u - 1] : kNoTaskId);
  }
  TaskId t = sb_.add_compute(c_, use.kind, use.piece);
  compute_[u] = t;
  if (gather != kNoTaskId) c_.g->depend(t, gather);
  if (h2d != kNoTaskId) c_.g->depend(t, h2d);
  c_.last_compute = t;
  const bool layer_first = use.piece == sb_.layer_first_piece_[layer];
  switch (use.kind) {
    case TaskKind::kForward:
      if (layer_first) sb_.add_forward_memory(c_, t, layer, /*recompute=*/false);
      break;
    case TaskKind::kRecompute:
      if (layer_first) sb_.add_forward_memory(c_, t, layer, /*recompute=*/true);
      break;
    default:
      // Backward runs from the layer's last piece down to its first, which releases the layer.
      sb_.add_backward_memory(c_, t, layer, layer_first);
      add_gradients(pc, t);
      break;
  }
  // Release the module's gathered parameters after this use unless it is reused soon.
  if (use.fetch > 0 && !keep_after_[u]) {
    c_.g->effect(t, true, Tier::kGpu, Category::kGatheredParams, -p_ * use.fetch);
    available_[use.module_key] = kNoTaskId;
    released_[use.module_key] = true;
  }
}

void StepBuilder::Stage3Pass::add_gradients(const Piece& pc, TaskId t) {
  double grads = 0;
  for (double e : pc.grads) grads += e;
  // Autograd's full 16-bit gradients, until the hook copies them into the IPG buffer.
  c_.g->effect(t, false, Tier::kGpu, Category::kGrads, p_ * grads);
  c_.g->effect(t, true, Tier::kGpu, Category::kGrads, -p_ * grads);
  for (double e : pc.grads) {
    bucketer_.add(e, t, [this](const PendingBucket& full) { reduce_bucket(full); });
  }
  // One IPG buffer: a bucket starting to fill waits for the previous bucket's copy.
  for (const PendingBucket& started : bucketer_.take_started()) {
    int prev = started.index - 1;
    if (prev < 0 || prev >= static_cast<int>(bucket_copy_.size())) continue;
    TaskId ct = bucket_copy_[prev];
    if (ct != kNoTaskId && ct < t) c_.g->depend(t, ct);
  }
}

void StepBuilder::Stage3Pass::reduce_bucket(const PendingBucket& bucket) {
  const Tier gpu = Tier::kGpu;
  const double bytes = p_ * bucket.elems;
  // reduce_scatter_coalesced: an interleaved copy of the bucket, then one reduce_scatter
  // (ref §2.2 item 10); it frees the single IPG buffer for the next bucket.
  TaskId ct = sb_.place(c_, sb_.memory_task(TaskKind::kBucketCopy, rs_stream_, 2 * bytes), -1,
                        bucket.index, bucket.closer);
  // The interleaved copy, or qgZ's int4 buffers (reduce_transient_bytes).
  const double transient =
      reduce_transient_bytes(sb_.groups_, p_, bucket.elems, sb_.sizes_.largest_param);
  c_.g->effect(ct, false, gpu, Category::kBuckets, transient);
  if (bucket_copy_.size() <= static_cast<size_t>(bucket.index)) {
    bucket_copy_.resize(bucket.index + 1, kNoTaskId);
  }
  bucket_copy_[bucket.index] = ct;
  // The reduce-scatter (or the all-reduce of "reduce_scatter": false, qgZ's all-to-alls, MiCS's shard reduce-scatter and replica
  // all-reduce: step_builder_zeropp.cc).
  StepBuilder::ReducePlan plan = sb_.grad_reduce_tasks(rs_stream_, bucket, c_.boundary);
  const double slice = bucket.elems / n_;
  if (!offload_) {
    // The reduced partition is added into grad_partitions_flat_buffer (read both, write one: 3
    // passes; the first micro-step copies instead, 2 passes -- a difference below this model's
    // resolution, ignored so that every micro-step but the last has the same tasks). A short
    // kernel on the same stream, counted into this task.
    plan.tasks[plan.reduced].latency_s +=
        hardware::memory_bound_time_s(sb_.cluster_.profile.gpu, 3 * a_ * slice);
  }
  TaskId rt = kNoTaskId;
  for (const Task& t : plan.tasks) rt = sb_.place(c_, t, -1, bucket.index, rt);
  c_.g->effect(rt, true, gpu, Category::kBuckets, -transient);
  c_.last_reduction = rt;
  if (offload_) offload_gradients(bucket, rt);
}

void StepBuilder::Stage3Pass::offload_gradients(const PendingBucket& bucket, TaskId reduced) {
  // partition_grads with offload: the partition goes to the pinned host buffer; later micro-
  // steps bring the accumulated one back to add (ref §5.2). At the boundary it is cast to fp32
  // and copied to the sub-group's fp32 gradient buffer.
  const double slice = bucket.elems / n_;
  TaskId last = reduced;
  if (!c_.first && !c_.boundary) {
    last = sb_.place(c_, sb_.offload_copy_task(TaskKind::kH2D, a_ * slice), -1,
                     bucket.index, last);
  }
  double down = c_.boundary ? sb_.config_.optimizer.master_bytes() * slice : a_ * slice;
  last = sb_.place(c_, sb_.offload_copy_task(TaskKind::kD2H, down), -1, bucket.index,
                   last);
  if (c_.boundary && z_.offload_optimizer.device == OffloadDevice::kNvme) {
    // The fp32 gradients of NVMe-swapped sub-groups are swapped out.
    sb_.place(c_, sb_.copy_task(TaskKind::kNvmeWrite, Resource::kNvmeWrite, 4 * slice), -1,
              bucket.index, last);
  }
}

void StepBuilder::build_stage3(Ctx& c) const { Stage3Pass(*this, c).run(); }

}  // namespace zplan::sim
