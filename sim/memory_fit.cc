#include "sim/memory_fit.h"

#include <algorithm>

namespace zplan::sim {

TierBytes capacity_of(const hardware::Profile& profile) {
  return {profile.gpu.memory_bytes, profile.node.host_memory_bytes,
          profile.node.nvme_capacity_bytes};
}

double MemoryFit::worst_over_fraction() const {
  return std::max({over.gpu / capacity.gpu, over.host / capacity.host,
                   over.nvme / std::max(1.0, capacity.nvme)});
}

MemoryFit memory_fit(const TierBytes& peak, const TierBytes& capacity, double headroom_fraction) {
  const double keep = 1 - headroom_fraction;
  MemoryFit f;
  f.peak = peak;
  f.capacity = capacity;
  f.headroom_fraction = headroom_fraction;
  f.over.gpu = std::max(0.0, peak.gpu - capacity.gpu * keep);
  f.over.host = std::max(0.0, peak.host - capacity.host * keep);
  f.over.nvme = std::max(0.0, peak.nvme - capacity.nvme * keep);
  return f;
}

}  // namespace zplan::sim
