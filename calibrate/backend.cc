#include "calibrate/backend.h"

#include <algorithm>

#include "kernels/cpu_threads.h"

namespace zplan::calibrate {

const char* sweep_name(Sweep sweep) {
  switch (sweep) {
    case Sweep::kTiny:
      return "tiny";
    case Sweep::kQuick:
      return "quick";
    case Sweep::kFull:
      return "full";
  }
  return "?";
}

int threads_per_rank(const ProbeOptions& options, int cpus, int local_ranks, int usable) {
  if (options.threads > 0) return options.threads;
  return kernels::rank_threads(cpus, local_ranks, usable);
}

std::vector<GemmShape> linear_layer_gemms(int64_t tokens, int64_t in, int64_t out) {
  return {{tokens, out, in, false, true},   // forward: y = x W^T
          {tokens, in, out, false, false},  // input gradient: dx = dy W
          {out, in, tokens, true, false}};  // weight gradient: dW = dy^T x
}

}  // namespace zplan::calibrate
