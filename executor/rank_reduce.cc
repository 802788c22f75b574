// ExecutorRank, continued: gradient reduction -- stage 0's flattened pieces, the all-reduce of
// whole buckets in stages 1-2, stage 2's accumulation, stage 3's interleaved copy and
// reduce-scatter. "ref §x" = reference/deepspeed_internals.md.
#include <algorithm>
#include <cassert>
#include <climits>
#include <vector>

#include "executor/rank_internal.h"

namespace zplan::executor {

// --- Gradient reduction (stages 0-2) ----------------------------------------------------------

void ExecutorRank::bucket_copy(const sim::Task& t) {
  const int b = t.index;
  if (stage_ == 0) {
    // buffered_allreduce_fallback: flatten this piece of the gradients (model order).
    const int64_t begin =
        static_cast<int64_t>(b) * static_cast<int64_t>(sim::kStage0AllreduceElems);
    const int64_t end =
        std::min(layout_.psi(), begin + static_cast<int64_t>(sim::kStage0AllreduceElems));
    Buffer flat(&mem_, Tier::kGpu, Category::kBuckets, static_cast<size_t>(end - begin));
    for (size_t id = 0; id < layout_.params().size(); ++id) {
      const ParamSlot& s = layout_.params()[id];
      int64_t lo = std::max(begin, s.flat_offset), hi = std::min(end, s.flat_offset + s.numel);
      if (lo >= hi) continue;
      dev_.copy(flat.data() + (lo - begin), full_grads_[id].data() + (lo - s.flat_offset),
                static_cast<size_t>(hi - lo));
    }
    bucket_tmp_.resize(std::max(bucket_tmp_.size(), static_cast<size_t>(b) + 1));
    bucket_tmp_[static_cast<size_t>(b)] = std::move(flat);
    return;
  }
  // Stage 3: reduce_scatter_coalesced's interleaved copy: rank r's block holds every tensor's
  // piece r, in partition order, so that the block each rank gets back is one contiguous range
  // of its partition (ref §2.2 item 10). It frees the IPG buffer.
  const BucketSlots& bk = layout_.buckets()[static_cast<size_t>(b)];
  int64_t lo = INT64_MAX;
  for (int id : bk.params) lo = std::min(lo, layout_.params()[static_cast<size_t>(id)].part_offset);
  const size_t block = static_cast<size_t>(bk.part_elems);
  Buffer inter(&mem_, Tier::kGpu, Category::kBuckets, block * static_cast<size_t>(layout_.dp()));
  const float* src = ipg_->data(b);
  for (int r = 0; r < layout_.dp(); ++r) {
    for (int id : bk.params) {
      const ParamSlot& s = layout_.params()[static_cast<size_t>(id)];
      float* dst = inter.data() + static_cast<size_t>(r) * block + (s.part_offset - lo);
      const int64_t first = static_cast<int64_t>(r) * s.part_numel;
      const int64_t len = std::clamp<int64_t>(s.numel - first, 0, s.part_numel);
      if (len > 0) dev_.copy(dst, src + s.bucket_offset + first, static_cast<size_t>(len));
      if (len < s.part_numel) dev_.zero(dst + len, static_cast<size_t>(s.part_numel - len));
    }
  }
  ipg_->release(b);
  bucket_tmp_[static_cast<size_t>(b)] = std::move(inter);
}

void ExecutorRank::scatter_own(int bucket, const float* data, float* partition, float scale,
                               bool add) {
  // This rank's slices of a reduced bucket (stages 1-2): the parts of its tensors inside
  // [pb, pb + P) of the flat buffer.
  const int64_t pb = layout_.partition_begin(), pe = pb + layout_.partition();
  for (int id : layout_.buckets()[static_cast<size_t>(bucket)].params) {
    const ParamSlot& s = layout_.params()[static_cast<size_t>(id)];
    const int64_t lo = std::max(pb, s.flat_offset), hi = std::min(pe, s.flat_offset + s.numel);
    if (lo >= hi) continue;
    const float* src = data + s.bucket_offset + (lo - s.flat_offset);
    float* dst = partition + (lo - pb);
    if (add) {
      dev_.add_scaled(dst, src, static_cast<size_t>(hi - lo), scale);
    } else {
      dev_.scale_copy(dst, src, static_cast<size_t>(hi - lo), scale);
    }
  }
}

void ExecutorRank::all_reduce(const sim::Task& t) {
  const int b = t.index;
  const float avg = 1.0f / static_cast<float>(dp_);
  if (stage_ == 3) {
    // MiCS at the boundary (mics.py MiCS_Optimizer.partition_grads -> allreduce_mics_shard_grads):
    // the bucket's accumulated gradient partition, averaged over the shard by the reduce-
    // scatter, is divided by the replica count (mics_utils.py scale_tensors) and all-reduced
    // across the replica group.
    kernels::Comm& replica = comm_of(t);
    const BucketSlots& bk = layout_.buckets()[static_cast<size_t>(b)];
    int64_t lo = INT64_MAX;
    for (int id : bk.params) {
      lo = std::min(lo, layout_.params()[static_cast<size_t>(id)].part_offset);
    }
    float* part = partition_acc_.data() + lo;
    const size_t count = static_cast<size_t>(bk.part_elems);
    dev_.scale_copy(part, part, count, 1.0f / static_cast<float>(replica.size()));
    replica.all_reduce(channel(t), part, count);
    return;
  }
  if (stage_ == 0) {
    // allreduce_and_copy: all-reduce the flat piece, average, copy back into the gradients.
    Buffer& flat = bucket_tmp_[static_cast<size_t>(b)];
    comm_of(t).all_reduce(channel(t), flat.data(), flat.size());
    const int64_t begin =
        static_cast<int64_t>(b) * static_cast<int64_t>(sim::kStage0AllreduceElems);
    const int64_t end = begin + static_cast<int64_t>(flat.size());
    for (size_t id = 0; id < layout_.params().size(); ++id) {
      const ParamSlot& s = layout_.params()[id];
      int64_t lo = std::max(begin, s.flat_offset), hi = std::min(end, s.flat_offset + s.numel);
      if (lo >= hi) continue;
      dev_.scale_copy(full_grads_[id].data() + (lo - s.flat_offset), flat.data() + (lo - begin),
                      static_cast<size_t>(hi - lo), avg);
    }
    flat.reset();
    return;
  }
  // Stages 1-2 (average_tensor with use_multi_rank_bucket_allreduce, ref §4.2): stage 1's hooks
  // run now (its gradients were kept whole), then the bucket is flattened, all-reduced, and this
  // rank keeps its slices.
  const BucketSlots& bk = layout_.buckets()[static_cast<size_t>(b)];
  Buffer flat(&mem_, Tier::kGpu, Category::kBuckets, static_cast<size_t>(bk.elems));
  if (stage_ == 1 && ipg_->is_big(b)) {
    dev_.copy(flat.data(), full_grads_[static_cast<size_t>(bk.params[0])].data(), flat.size());
  } else {
    if (stage_ == 1) {
      ipg_->claim(b);
      for (int id : bk.params) {
        const ParamSlot& s = layout_.params()[static_cast<size_t>(id)];
        dev_.copy(ipg_->data(b) + s.bucket_offset, full_grads_[static_cast<size_t>(id)].data(),
                  static_cast<size_t>(s.numel));
      }
    } else {
      ipg_->wait_ready(b);
    }
    dev_.copy(flat.data(), ipg_->data(b), flat.size());
    if (!offload()) ipg_->release(b);
  }
  comm_of(t).all_reduce(channel(t), flat.data(), flat.size());
  if (offload() && !(stage_ == 1 && ipg_->is_big(b))) {
    // allreduce_and_copy: the reduced bucket back into the IPG buffer, which the offload copies
    // read; the buffer is free again when they are done (ref §5.1).
    dev_.copy(ipg_->data(b), flat.data(), flat.size());
    flat.reset();
  }
  if (!offload()) {
    Buffer& target = reduce_target();
    if (target.empty()) {
      // grads_in_partition, on the first reduction of a backward (item 6); its padding is zero.
      target =
          Buffer(&mem_, Tier::kGpu, Category::kGrads, static_cast<size_t>(layout_.partition()));
      const int64_t pb = layout_.partition_begin();
      const int64_t valid = std::clamp<int64_t>(layout_.psi() - pb, 0, layout_.partition());
      dev_.zero(target.data() + valid, static_cast<size_t>(layout_.partition() - valid));
    }
    scatter_own(b, flat.data(), target.data(), avg, false);
  } else if (!flat.empty()) {
    bucket_tmp_[static_cast<size_t>(b)] = std::move(flat);  // stage 1's extra large tensor
  }
  if (!offload() && b + 1 == static_cast<int>(layout_.buckets().size())) ipg_->free();
}

const float* ExecutorRank::reduced_bucket(int b) {
  // Where an offloaded bucket's reduced gradients are (stages 1-2): its IPG buffer, or the
  // flattened copy of an extra large tensor.
  const Buffer& tmp = bucket_tmp_[static_cast<size_t>(b)];
  return tmp.empty() ? ipg_->data(b) : tmp.data();
}

void ExecutorRank::done_with_reduced(int b) {
  bucket_tmp_[static_cast<size_t>(b)].reset();
  ipg_->release(b);
  // The backward epilogue frees the IPG buffers once the last bucket is out.
  if (b + 1 == static_cast<int>(layout_.buckets().size())) ipg_->free();
}

Buffer& ExecutorRank::reduce_target() {
  // Stage 2's micro-steps after the first reduce into a new partition that grad_accumulate adds
  // to the accumulated one; otherwise the reduction fills the partition the step uses.
  return stage_ == 2 && !first_ ? partition_new_ : partition_acc_;
}

void ExecutorRank::grad_accumulate(const sim::Task& t) {
  assert(stage_ == 2);
  (void)t;
  // independent_gradient_partition_epilogue: all_grad_tensors += the new partition (item 6).
  dev_.axpby(partition_acc_.data(), partition_new_.data(), partition_acc_.size(), 1.0f, 1.0f);
  partition_new_.reset();
}

void ExecutorRank::unpack_slices(int bucket, const float* src, float* dst, float scale, bool add) {
  const BucketSlots& bk = layout_.buckets()[static_cast<size_t>(bucket)];
  int64_t lo = INT64_MAX;
  for (int id : bk.params) lo = std::min(lo, layout_.params()[static_cast<size_t>(id)].part_offset);
  if (add) {
    dev_.add_scaled(dst + lo, src, static_cast<size_t>(bk.part_elems), scale);
  } else {
    dev_.scale_copy(dst + lo, src, static_cast<size_t>(bk.part_elems), scale);
  }
}

void ExecutorRank::reduce_scatter(const sim::Task& t) {
  const int b = t.index;
  const BucketSlots& bk = layout_.buckets()[static_cast<size_t>(b)];
  Buffer& inter = bucket_tmp_[static_cast<size_t>(b)];
  comm_of(t).reduce_scatter(channel(t), inter.data(), static_cast<size_t>(bk.part_elems));
  if (offload()) return;  // the offload copies take the slices from here
  // partition_grads: the reduced slices into grad_partitions_flat_buffer, averaged -- copied on
  // the first micro-step, added after (a short kernel on the same stream, part of this task).
  // Averaged over the partition group (the MiCS shard's: MiCS_Optimizer sets dp_process_group
  // to it).
  unpack_slices(b, inter.data(), partition_acc_.data(), 1.0f / static_cast<float>(layout_.dp()),
                !first_);
  inter.reset();
}

}  // namespace zplan::executor
