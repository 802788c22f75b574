// The reference executor's tracking allocator: every buffer the executor allocates goes through
// it, tagged with the simulator's tier and category (sim::Tier, sim::Category), so that the
// measured peak of each tier can be compared with the simulated one.
//
// Tiers: kGpu is the device arena (host memory standing for GPU memory on a CPU device),
// kPinnedHost memory that is mlock'ed (or, when the lock limit refuses, pre-faulted: the report
// says which), kHost plain pageable memory, kNvme bytes reserved in the NVMe swap files (counted by
// the swap file, executor/swap.h). Counts are the bytes asked for ("allocated", as PyTorch's
// memory_allocated() counts them), not what the system reserved: freed blocks are cached by size
// and reused, like PyTorch's caching allocator, so that a step does not pay for page faults.
//
// Thread-safe: the executor's workers allocate and free concurrently. Every change is stamped
// with a time from the executor's clock, so that the measured trace gets memory counter tracks.
#ifndef ZPLAN_EXECUTOR_MEMORY_H_
#define ZPLAN_EXECUTOR_MEMORY_H_

#include <array>
#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sim/engine.h"
#include "sim/memory_model.h"

namespace zplan::executor {

// Raw memory of one tier (the device's arena or the host's), without accounting.
class RawMemory {
 public:
  virtual ~RawMemory() = default;
  // Returns `bytes` bytes aligned to 4096 (O_DIRECT needs it), touched so that no page fault is
  // left for later. Throws std::bad_alloc.
  virtual void* allocate(sim::Tier tier, size_t bytes) = 0;
  virtual void release(sim::Tier tier, void* ptr, size_t bytes) = 0;
  // How pinned host memory is pinned on this device: "mlock", "pre-faulted (mlock refused: ...)",
  // "cudaHostAlloc".
  virtual std::string pinned_note() const = 0;
};

// Plain host memory for every tier: the CPU device. Pinned blocks are mlock'ed when the limit
// allows, else pre-faulted.
class HostRawMemory : public RawMemory {
 public:
  void* allocate(sim::Tier tier, size_t bytes) override;
  void release(sim::Tier tier, void* ptr, size_t bytes) override;
  std::string pinned_note() const override;

 private:
  mutable std::mutex mu_;
  bool lock_failed_ = false;
  std::string lock_error_;
};

class MemoryTracker {
 public:
  using Clock = std::chrono::steady_clock;

  explicit MemoryTracker(RawMemory* raw) : raw_(raw) {}
  ~MemoryTracker();
  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;

  // Allocates `bytes` of `tier` counted under `category`. The block is uninitialized.
  void* allocate(sim::Tier tier, sim::Category category, size_t bytes);
  void release(sim::Tier tier, sim::Category category, void* ptr, size_t bytes);
  // Bytes held outside this allocator (NVMe swap file regions): counted, nothing allocated.
  void add_external(sim::Tier tier, sim::Category category, double bytes);

  // Peaks since the last reset_peaks(), per tier, with the breakdown at each tier's peak.
  std::array<double, sim::kNumTiers> peak() const;
  std::array<sim::MemoryBreakdown, sim::kNumTiers> at_peak() const;
  std::array<sim::MemoryBreakdown, sim::kNumTiers> live() const;
  void reset_peaks();

  // Records a sample of every tier after each change, stamped relative to `epoch`, until
  // stop_samples(); take_samples() hands them over.
  void start_samples(Clock::time_point epoch);
  void stop_samples();
  std::vector<sim::MemorySample> take_samples();

  // Drops the cached free blocks (returns them to the system).
  void trim();
  std::string pinned_note() const { return raw_->pinned_note(); }

 private:
  void note_change_locked();

  RawMemory* raw_;
  mutable std::mutex mu_;
  std::array<sim::MemoryBreakdown, sim::kNumTiers> live_{};
  std::array<sim::MemoryBreakdown, sim::kNumTiers> at_peak_{};
  std::array<double, sim::kNumTiers> peak_{};
  // Free blocks by (tier, size): a step allocates the same sizes every time.
  std::map<std::pair<int, size_t>, std::vector<void*>> cache_;
  bool sampling_ = false;
  Clock::time_point epoch_;
  std::vector<sim::MemorySample> samples_;
};

// An owned, tracked block of floats; movable, freed on destruction or reset().
class Buffer {
 public:
  Buffer() = default;
  Buffer(MemoryTracker* tracker, sim::Tier tier, sim::Category category, size_t count);
  ~Buffer() { reset(); }
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  float* data() const { return data_; }
  size_t size() const { return count_; }  // floats
  size_t bytes() const { return count_ * sizeof(float); }
  bool empty() const { return data_ == nullptr; }
  sim::Tier tier() const { return tier_; }
  void reset();

 private:
  MemoryTracker* tracker_ = nullptr;
  sim::Tier tier_ = sim::Tier::kGpu;
  sim::Category category_ = sim::Category::kActivations;
  float* data_ = nullptr;
  size_t count_ = 0;
};

// A block of floats straight from RawMemory, outside the tracker's counts: data the simulator
// does not count as such (the synthetic inputs and targets) or counts elsewhere (the GEMM operands
// of transformer-shaped models, whose bytes the activation plan holds). Movable; freed on
// destruction.
// Gives a block back to the RawMemory it came from (UntrackedBuffer's deleter).
struct RawRelease {
  RawMemory* raw = nullptr;
  sim::Tier tier = sim::Tier::kGpu;
  size_t bytes = 0;
  void operator()(float* p) const { raw->release(tier, p, bytes); }
};

class UntrackedBuffer {
 public:
  UntrackedBuffer() = default;
  UntrackedBuffer(RawMemory* raw, sim::Tier tier, size_t count)
      : data_(static_cast<float*>(raw->allocate(tier, count * sizeof(float))),
              RawRelease{raw, tier, count * sizeof(float)}),
        count_(count) {}

  float* data() const { return data_.get(); }
  size_t size() const { return data_ ? count_ : 0; }

 private:
  std::unique_ptr<float, RawRelease> data_;
  size_t count_ = 0;
};

}  // namespace zplan::executor

#endif  // ZPLAN_EXECUTOR_MEMORY_H_
