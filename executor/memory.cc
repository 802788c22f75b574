#include "executor/memory.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include <sys/mman.h>

namespace zplan::executor {

namespace {

constexpr size_t kAlign = 4096;

size_t rounded(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

void touch(void* p, size_t bytes) {
  // One write per page faults every page in now, not inside a timed task.
  auto* c = static_cast<volatile char*>(p);
  for (size_t i = 0; i < bytes; i += kAlign) c[i] = 0;
}

}  // namespace

void* HostRawMemory::allocate(sim::Tier tier, size_t bytes) {
  size_t size = rounded(bytes == 0 ? 1 : bytes);
  void* p = std::aligned_alloc(kAlign, size);
  if (p == nullptr) throw std::bad_alloc();
  if (tier == sim::Tier::kPinnedHost) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!lock_failed_ && mlock(p, size) != 0) {
      lock_failed_ = true;
      lock_error_ = std::strerror(errno);
    }
  }
  touch(p, size);
  return p;
}

void HostRawMemory::release(sim::Tier tier, void* ptr, size_t bytes) {
  if (tier == sim::Tier::kPinnedHost) munlock(ptr, rounded(bytes == 0 ? 1 : bytes));
  std::free(ptr);
}

std::string HostRawMemory::pinned_note() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (lock_failed_) return "pre-faulted (mlock refused: " + lock_error_ + ")";
  return "mlock";
}

MemoryTracker::~MemoryTracker() { trim(); }

void* MemoryTracker::allocate(sim::Tier tier, sim::Category category, size_t bytes) {
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find({static_cast<int>(tier), bytes});
    if (it != cache_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
    }
  }
  if (p == nullptr) p = raw_->allocate(tier, bytes);
  std::lock_guard<std::mutex> lock(mu_);
  live_[static_cast<int>(tier)][category] += static_cast<double>(bytes);
  note_change_locked();
  return p;
}

void MemoryTracker::release(sim::Tier tier, sim::Category category, void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  live_[static_cast<int>(tier)][category] -= static_cast<double>(bytes);
  cache_[{static_cast<int>(tier), bytes}].push_back(ptr);
  note_change_locked();
}

void MemoryTracker::add_external(sim::Tier tier, sim::Category category, double bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  live_[static_cast<int>(tier)][category] += bytes;
  note_change_locked();
}

void MemoryTracker::note_change_locked() {
  sim::MemorySample sample;
  for (int t = 0; t < sim::kNumTiers; ++t) {
    double total = live_[t].total();
    sample.bytes[t] = total;
    if (total > peak_[t]) {
      peak_[t] = total;
      at_peak_[t] = live_[t];
    }
  }
  if (sampling_) {
    auto d = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - epoch_);
    sample.at = sim::SimTime(sim::SimDuration(std::max<int64_t>(0, d.count())));
    samples_.push_back(sample);
  }
}

std::array<double, sim::kNumTiers> MemoryTracker::peak() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

std::array<sim::MemoryBreakdown, sim::kNumTiers> MemoryTracker::at_peak() const {
  std::lock_guard<std::mutex> lock(mu_);
  return at_peak_;
}

std::array<sim::MemoryBreakdown, sim::kNumTiers> MemoryTracker::live() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_;
}

void MemoryTracker::reset_peaks() {
  std::lock_guard<std::mutex> lock(mu_);
  for (int t = 0; t < sim::kNumTiers; ++t) {
    peak_[t] = live_[t].total();
    at_peak_[t] = live_[t];
  }
}

void MemoryTracker::start_samples(Clock::time_point epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  sampling_ = true;
  epoch_ = epoch;
  samples_.clear();
}

void MemoryTracker::stop_samples() {
  std::lock_guard<std::mutex> lock(mu_);
  sampling_ = false;
}

std::vector<sim::MemorySample> MemoryTracker::take_samples() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<sim::MemorySample> out;
  out.swap(samples_);
  return out;
}

void MemoryTracker::trim() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, blocks] : cache_) {
    for (void* p : blocks) raw_->release(static_cast<sim::Tier>(key.first), p, key.second);
  }
  cache_.clear();
}

Buffer::Buffer(MemoryTracker* tracker, sim::Tier tier, sim::Category category, size_t count)
    : tracker_(tracker), tier_(tier), category_(category), count_(count) {
  data_ = static_cast<float*>(tracker->allocate(tier, category, count * sizeof(float)));
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    tracker_ = other.tracker_;
    tier_ = other.tier_;
    category_ = other.category_;
    data_ = other.data_;
    count_ = other.count_;
    other.data_ = nullptr;
    other.count_ = 0;
  }
  return *this;
}

void Buffer::reset() {
  if (data_ != nullptr) tracker_->release(tier_, category_, data_, count_ * sizeof(float));
  data_ = nullptr;
  count_ = 0;
}

}  // namespace zplan::executor
