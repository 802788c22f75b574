// Pieces shared by the ExecutorRank files (rank.cc: state, dispatch and results;
// rank_compute.cc; rank_reduce.cc; rank_transfers.cc): the names they
// use from sim/, and the IPG buffers that the gradient hooks fill and the reductions empty.
#ifndef ZPLAN_EXECUTOR_RANK_INTERNAL_H_
#define ZPLAN_EXECUTOR_RANK_INTERNAL_H_

#include <condition_variable>
#include <mutex>
#include <vector>

#include "executor/rank.h"

namespace zplan::executor {

using sim::Category;
using sim::OffloadDevice;
using sim::Resource;
using sim::TaskId;
using sim::TaskKind;
using sim::Tier;

// The IPG (independent partition gradient) buffers of stages 1-3: `count` buffers of the bucket
// size, bucket k in buffer k % count (ref §2.1 item 4, §2.2 item 5). A gradient whose buffer still
// holds an earlier bucket that has not been copied out waits in `pending` (it stays allocated,
// as autograd's gradient does until DeepSpeed's hook can copy it) until release() of that bucket.
struct ExecutorRank::Ipg {
  ExecutorDevice* dev = nullptr;
  MemoryTracker* mem = nullptr;
  const ExecutorLayout* layout = nullptr;
  int count = 1;
  size_t capacity = 0;
  std::vector<Buffer> bufs;
  std::vector<int> owner;
  struct Pending {
    int param;
    Buffer grad;
  };
  std::vector<std::vector<Pending>> pending;
  // A gradient larger than a whole bucket is its own bucket and never enters an IPG buffer
  // (DeepSpeed's "extra large param", reduced from param.grad): kept here, by bucket.
  std::vector<Buffer> big;
  std::mutex mu;
  std::condition_variable cv;

  bool is_big(int bucket) const {
    return layout->buckets()[static_cast<size_t>(bucket)].elems > static_cast<int64_t>(capacity);
  }

  bool allocated() const { return !bufs.empty(); }
  void allocate() {
    std::lock_guard<std::mutex> lock(mu);
    for (int i = 0; i < count; ++i)
      bufs.emplace_back(mem, Tier::kGpu, Category::kBuckets, capacity);
    owner.assign(static_cast<size_t>(count), -1);
    pending.clear();
    pending.resize(static_cast<size_t>(count));
  }
  void free() {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& waiting : pending) {
      assert(waiting.empty());
      (void)waiting;
    }
    bufs.clear();
  }
  float* data(int bucket) {
    std::lock_guard<std::mutex> lock(mu);
    if (is_big(bucket)) return big[static_cast<size_t>(bucket)].data();
    return bufs[static_cast<size_t>(bucket % count)].data();
  }
  // Stage 1: waits until the bucket's buffer is free (an offload copy may still read the
  // previous bucket) and takes it.
  void claim(int bucket) {
    std::unique_lock<std::mutex> lock(mu);
    const size_t slot = static_cast<size_t>(bucket % count);
    cv.wait(lock, [&] { return owner[slot] < 0 || owner[slot] == bucket; });
    owner[slot] = bucket;
  }
  // Waits until the bucket's buffer holds the bucket and none of its gradients wait: when the
  // buffer's previous bucket is still being copied out (an offload copy on another resource),
  // DeepSpeed synchronizes on that copy before refilling the buffer.
  void wait_ready(int bucket) {
    std::unique_lock<std::mutex> lock(mu);
    if (is_big(bucket)) return;
    const size_t slot = static_cast<size_t>(bucket % count);
    cv.wait(lock, [&] {
      if (owner[slot] != bucket) return false;
      for (const Pending& p : pending[slot]) {
        if (layout->params()[static_cast<size_t>(p.param)].bucket == bucket) return false;
      }
      return true;
    });
  }
  // The gradient hook: into the bucket's buffer, or pending.
  void put(int param, Buffer&& grad) {
    const ParamSlot& s = layout->params()[static_cast<size_t>(param)];
    const size_t slot = static_cast<size_t>(s.bucket % count);
    std::lock_guard<std::mutex> lock(mu);
    if (is_big(s.bucket)) {
      big[static_cast<size_t>(s.bucket)] = std::move(grad);
      return;
    }
    if (owner[slot] < 0 || owner[slot] == s.bucket) {
      owner[slot] = s.bucket;
      dev->copy(bufs[slot].data() + s.bucket_offset, grad.data(), static_cast<size_t>(s.numel));
      grad.reset();
    } else {
      pending[slot].push_back(Pending{param, std::move(grad)});
    }
  }
  // Bucket `bucket` has been copied out of its buffer: the buffer takes the waiting gradients.
  void release(int bucket) {
    const size_t slot = static_cast<size_t>(bucket % count);
    std::lock_guard<std::mutex> lock(mu);
    if (is_big(bucket)) {
      big[static_cast<size_t>(bucket)].reset();
      return;
    }
    owner[slot] = -1;
    // The earliest waiting bucket takes the buffer; later ones keep waiting for it.
    int next = INT_MAX;
    for (const Pending& p : pending[slot]) {
      next = std::min(next, layout->params()[static_cast<size_t>(p.param)].bucket);
    }
    std::vector<Pending> still;
    for (Pending& p : pending[slot]) {
      const ParamSlot& s = layout->params()[static_cast<size_t>(p.param)];
      if (s.bucket != next) {
        still.push_back(std::move(p));
        continue;
      }
      owner[slot] = s.bucket;
      dev->copy(bufs[slot].data() + s.bucket_offset, p.grad.data(), static_cast<size_t>(s.numel));
      p.grad.reset();
    }
    pending[slot] = std::move(still);
    cv.notify_all();
  }
};

}  // namespace zplan::executor

#endif  // ZPLAN_EXECUTOR_RANK_INTERNAL_H_
