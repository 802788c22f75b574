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

struct Use {
  int piece = 0;
  TaskKind kind = TaskKind::kForward;
  double fetch = 0;  // elements its module gathers (0: nothing to gather)
  int module_key = -1;
};

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

void StepBuilder::build_stage3(Ctx& c) const {
  const ZeroConfig& z = config_.zero;
  const double p = sizes_.param_bytes;
  const double a = sizes_.grad_accum_bytes;
  const double n = cluster_.gpus;
  const Tier gpu = Tier::kGpu;
  const bool offload = z.offload_optimizer.device != OffloadDevice::kNone;
  const OffloadDevice param_dev = z.offload_param.device;
  const Resource ag_stream = z.overlap_comm ? Resource::kGatherStream : Resource::kCompute;
  const Resource rs_stream = z.overlap_comm ? Resource::kReduceStream : Resource::kCompute;

  // The compute of this micro-step in order: forward pieces, then per layer from the last: its
  // recompute (forward order) under checkpointing, then its backward pieces (reverse order).
  std::vector<Use> uses;
  auto use_of = [&](int piece, TaskKind kind) {
    Use u;
    u.piece = piece;
    u.kind = kind;
    const Piece& pc = pieces_[piece];
    if (pc.fetch_module >= 0) {
      u.fetch = sizes_.module_fetch[pc.layer][pc.fetch_module];
      u.module_key = module_base_[pc.layer] + pc.fetch_module;
    }
    return u;
  };
  for (size_t pi = 0; pi < pieces_.size(); ++pi) uses.push_back(use_of(pi, TaskKind::kForward));
  const int n_layers = static_cast<int>(model_.layers().size());
  for (int layer = n_layers; layer-- > 0;) {
    const int begin = layer_first_piece_[layer], end = layer_first_piece_[layer + 1];
    if (acts_.checkpointed[layer]) {
      for (int pi = begin; pi < end; ++pi) uses.push_back(use_of(pi, TaskKind::kRecompute));
    }
    for (int pi = end; pi-- > begin;) uses.push_back(use_of(pi, TaskKind::kBackward));
  }

  // A module stays gathered after a use when its next use comes within max_reuse_distance
  // elements of fetches (__params_to_release, ref §2.2 item 8).
  const size_t n_uses = uses.size();
  std::vector<bool> keep_after(n_uses, false);
  {
    // Index of each module's next use, scanning backwards (kNone: not used again).
    constexpr size_t kNone = static_cast<size_t>(-1);
    std::vector<size_t> next_use(module_count_, kNone);
    std::vector<double> fetched_before(n_uses + 1, 0);
    for (size_t u = 0; u < n_uses; ++u) fetched_before[u + 1] = fetched_before[u] + uses[u].fetch;
    for (size_t u = n_uses; u-- > 0;) {
      if (uses[u].fetch <= 0) continue;
      size_t next = next_use[uses[u].module_key];
      if (next != kNone) {
        double between = fetched_before[next] - fetched_before[u + 1];
        keep_after[u] = between < static_cast<double>(z.max_reuse_distance);
      }
      next_use[uses[u].module_key] = u;
    }
  }

  // Prefetch reach, counted in gathers: kFetchLookahead, or more when the coming gathers fit the
  // prefetch bucket (capped by stage3_max_live_parameters).
  const double window = std::min(static_cast<double>(z.prefetch_bucket_size),
                                 static_cast<double>(z.max_live_parameters));

  std::vector<TaskId> compute(n_uses, kNoTaskId);
  std::vector<size_t> gather_use;  // consumer use of each gather, in order
  std::vector<double> gather_elems;
  std::vector<TaskId> available(module_count_, kNoTaskId);  // module -> gather holding it
  Bucketer bucketer(sizes_.bucket);
  std::vector<TaskId> bucket_copy;  // the interleave copy of each bucket (frees the IPG buffer)

  auto reduce_bucket = [&](const PendingBucket& b) {
    const double bytes = p * b.elems;
    // reduce_scatter_coalesced: an interleaved copy of the bucket, then one reduce_scatter
    // (ref §2.2 item 10); it frees the single IPG buffer for the next bucket.
    TaskId ct =
        place(c, memory_task(TaskKind::kBucketCopy, rs_stream, 2 * bytes), -1, b.index, b.closer);
    c.g->effect(ct, false, gpu, Category::kBuckets, bytes);
    if (bucket_copy.size() <= static_cast<size_t>(b.index))
      bucket_copy.resize(b.index + 1, kNoTaskId);
    bucket_copy[b.index] = ct;
    Task rs = collective_task(TaskKind::kReduceScatter, rs_stream,
                              hardware::Collective::kReduceScatter, bytes);
    const double slice = b.elems / n;
    if (!offload) {
      // The reduced partition is added into grad_partitions_flat_buffer (read both, write one: 3
      // passes; the first micro-step copies instead, 2 passes -- a difference below this model's
      // resolution, ignored so that every micro-step but the last has the same tasks). A short
      // kernel on the same stream, counted into this task.
      rs.latency_s += hardware::memory_bound_time_s(cluster_.profile.gpu, 3 * a * slice);
    }
    TaskId rt = place(c, rs, -1, b.index, kNoTaskId);
    c.g->effect(rt, true, gpu, Category::kBuckets, -bytes);
    c.last_reduction = rt;
    if (!offload) return;
    // partition_grads with offload: the partition goes to the pinned host buffer; later micro-
    // steps bring the accumulated one back to add (ref §5.2). At the boundary it is cast to fp32
    // and copied to the sub-group's fp32 gradient buffer.
    TaskId last = rt;
    if (!c.first && !c.boundary) {
      last = place(c, copy_task(TaskKind::kH2D, Resource::kH2D, a * slice), -1, b.index, last);
    }
    double down = c.boundary ? 4 * slice : a * slice;
    last = place(c, copy_task(TaskKind::kD2H, Resource::kD2H, down), -1, b.index, last);
    if (c.boundary && z.offload_optimizer.device == OffloadDevice::kNvme) {
      // The fp32 gradients of NVMe-swapped sub-groups are swapped out.
      place(c, copy_task(TaskKind::kNvmeWrite, Resource::kNvmeWrite, 4 * slice), -1, b.index, last);
    }
  };

  for (size_t u = 0; u < n_uses; ++u) {
    const Use& use = uses[u];
    const Piece& pc = pieces_[use.piece];
    TaskId gather = kNoTaskId;
    if (use.fetch > 0) {
      if (available[use.module_key] != kNoTaskId) {
        gather = available[use.module_key];  // still gathered from an earlier use
      } else {
        // Issue point: the gather may start once compute has reached the use `reach` gathers
        // back (its preceding compute task has ended).
        const size_t q = gather_use.size();
        int reach = kFetchLookahead;
        double sum = use.fetch;
        for (size_t r = q; r-- > 0;) {
          sum += gather_elems[r];
          if (sum > window) break;
          reach = std::max(reach, static_cast<int>(q - r) + 1);
        }
        TaskId issue_after = kNoTaskId;
        if (static_cast<int>(q) >= reach) {
          size_t issue_use = gather_use[q - reach];
          if (issue_use > 0) issue_after = compute[issue_use - 1];
        }
        gather_use.push_back(u);
        gather_elems.push_back(use.fetch);
        const double part_bytes = p * use.fetch / n;
        TaskId before = issue_after;
        // offload_param: the partition comes from pinned host memory (or NVMe first) and is
        // copied to the GPU before the all-gather (_all_gather_dtype, ref §5.2).
        if (param_dev == OffloadDevice::kNvme) {
          before = place(c, copy_task(TaskKind::kNvmeRead, Resource::kNvmeRead, part_bytes),
                         pc.layer, pc.fetch_module, before);
        }
        if (param_dev != OffloadDevice::kNone) {
          before = place(c, copy_task(TaskKind::kH2D, Resource::kH2D, part_bytes), pc.layer,
                         pc.fetch_module, before);
          c.g->effect(before, false, gpu, Category::kGatheredParams, part_bytes);
        }
        Task ag = collective_task(TaskKind::kAllGather, ag_stream, hardware::Collective::kAllGather,
                                  p * use.fetch);
        // Two copies on the gather stream, each a read and a write: this rank's partition into
        // the flat buffer before the gather and the per-parameter torch.cat out of it after
        // (ref §2.2 item 8). Memory-bound kernels, counted into the task as fixed time.
        ag.latency_s +=
            hardware::memory_bound_time_s(cluster_.profile.gpu, 2 * (part_bytes + p * use.fetch));
        gather = place(c, ag, pc.layer, pc.fetch_module, before);
        // The flat gather output plus the per-parameter torch.cat copy; the flat one is dropped
        // when the gather completes (ref §2.2 item 8).
        c.g->effect(gather, false, gpu, Category::kGatheredParams, 2 * p * use.fetch);
        c.g->effect(gather, true, gpu, Category::kGatheredParams, -p * use.fetch);
        if (param_dev != OffloadDevice::kNone) {
          c.g->effect(gather, true, gpu, Category::kGatheredParams, -part_bytes);
        }
        available[use.module_key] = gather;
      }
    }

    const int layer = pc.layer;
    TaskId h2d = kNoTaskId;
    if (use.kind == TaskKind::kRecompute && use.piece == layer_first_piece_[layer]) {
      h2d = add_recompute(c, layer, u > 0 ? compute[u - 1] : kNoTaskId);
    }
    TaskId t = add_compute(c, use.kind, use.piece);
    compute[u] = t;
    if (gather != kNoTaskId) c.g->depend(t, gather);
    if (h2d != kNoTaskId) c.g->depend(t, h2d);
    c.last_compute = t;
    const bool layer_first = use.piece == layer_first_piece_[layer];
    switch (use.kind) {
      case TaskKind::kForward:
        if (layer_first) add_forward_memory(c, t, layer, /*recompute=*/false);
        break;
      case TaskKind::kRecompute:
        if (layer_first) add_forward_memory(c, t, layer, /*recompute=*/true);
        break;
      default: {
        // Backward runs from the layer's last piece down to its first, which releases the layer.
        add_backward_memory(c, t, layer, layer_first);
        double grads = 0;
        for (double e : pc.grads) grads += e;
        // Autograd's full 16-bit gradients, until the hook copies them into the IPG buffer.
        c.g->effect(t, false, gpu, Category::kGrads, p * grads);
        c.g->effect(t, true, gpu, Category::kGrads, -p * grads);
        for (double e : pc.grads) bucketer.add(e, t, reduce_bucket);
        // One IPG buffer: a bucket starting to fill waits for the previous bucket's copy.
        for (const PendingBucket& started : bucketer.take_started()) {
          int prev = started.index - 1;
          if (prev < 0 || prev >= static_cast<int>(bucket_copy.size())) continue;
          TaskId ct = bucket_copy[prev];
          if (ct != kNoTaskId && ct < t) c.g->depend(t, ct);
        }
        break;
      }
    }
    // Release the module's gathered parameters after this use unless it is reused soon.
    if (use.fetch > 0 && !keep_after[u]) {
      c.g->effect(t, true, gpu, Category::kGatheredParams, -p * use.fetch);
      available[use.module_key] = kNoTaskId;
    }
  }
  bucketer.flush(reduce_bucket);
}

}  // namespace zplan::sim
