#include "sim/memory_breakdown.h"

namespace zplan::sim {

const char* tier_name(Tier tier) {
  switch (tier) {
    case Tier::kGpu:
      return "gpu";
    case Tier::kPinnedHost:
      return "pinned_host";
    case Tier::kHost:
      return "host";
    case Tier::kNvme:
      return "nvme";
  }
  return "?";
}

const char* category_name(Category category) {
  static const char* const kNames[kNumCategories] = {
      "params16",      "master32",    "optimizer_states", "grads",
      "grads32",       "buckets",     "gathered_params",  "activations",
      "checkpoints",   "swap_buffers", "runtime"};
  return kNames[static_cast<int>(category)];
}

double MemoryBreakdown::total() const {
  double t = 0;
  for (double b : bytes) t += b;
  return t;
}

Category MemoryBreakdown::dominant() const {
  int best = 0;
  for (int i = 1; i < kNumCategories; ++i) {
    if (bytes[i] > bytes[best]) best = i;
  }
  return static_cast<Category>(best);
}

MemoryBreakdown& MemoryBreakdown::operator+=(const MemoryBreakdown& other) {
  for (int i = 0; i < kNumCategories; ++i) bytes[i] += other.bytes[i];
  return *this;
}

MemoryBreakdown MemoryBreakdown::scaled(double factor) const {
  MemoryBreakdown out = *this;
  for (double& b : out.bytes) b *= factor;
  return out;
}

void MemoryBreakdown::add_fragmentation(double fraction) {
  (*this)[Category::kRuntime] += fraction * (total() - (*this)[Category::kRuntime]);
}

}  // namespace zplan::sim
