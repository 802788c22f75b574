#include "kernels/cpu_threads.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>

namespace zplan::kernels {

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

int rank_threads(int cpus, int local_ranks, int usable) {
  const int share = std::max(1, cpus) / std::max(1, local_ranks);
  return std::max(1, std::min(share, usable));
}

}  // namespace zplan::kernels
