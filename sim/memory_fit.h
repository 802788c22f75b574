// The memory verdict: whether a step's peak memory fits the cluster, tier by tier, after leaving a
// headroom free, and by how much it is over. Every "fits" zplan prints or ranks by -- `zplan
// memory`, `zplan simulate`, the planner's verdicts and its near misses -- is one MemoryFit made by
// memory_fit(), computed where the peaks are known: MemoryReport::fit (the analytic bound),
// StepResult::fit (the simulated step, with the analytic bound) and planner::Evaluation::fit.
#ifndef ZPLAN_SIM_MEMORY_FIT_H_
#define ZPLAN_SIM_MEMORY_FIT_H_

#include "hardware/profile.h"

namespace zplan::sim {

// Bytes of the three tiers that have a capacity: GPU memory (per GPU), host memory (per node;
// pinned and pageable share it) and NVMe (per node).
struct TierBytes {
  double gpu = 0;
  double host = 0;
  double nvme = 0;
};

// The capacities of `profile`'s tiers: GPU memory, host memory and NVMe capacity of a node.
TierBytes capacity_of(const hardware::Profile& profile);

struct MemoryFit {
  TierBytes peak;                // what was judged
  TierBytes capacity;            // the tiers' capacities, before headroom
  double headroom_fraction = 0;  // of each capacity that must stay free
  TierBytes over;                // peak - capacity x (1 - headroom) where positive, else 0

  bool gpu_fits() const { return over.gpu == 0; }
  bool host_fits() const { return over.host == 0; }
  bool nvme_fits() const { return over.nvme == 0; }
  bool fits() const { return gpu_fits() && host_fits() && nvme_fits(); }
  // The largest shortfall relative to its tier's capacity (0 when it fits), to rank near misses.
  // A node without NVMe counts its NVMe shortfall against 1 byte.
  double worst_over_fraction() const;
};

// `peak` against `capacity` x (1 - headroom_fraction), tier by tier: a tier fits when its peak is
// at most that.
MemoryFit memory_fit(const TierBytes& peak, const TierBytes& capacity,
                     double headroom_fraction = 0);

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_MEMORY_FIT_H_
