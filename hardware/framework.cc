// The fitted framework constants: the one place they live. Refit with
//   scripts/fidelity.sh --fit --markdown
// and copy the "fitted on all sources" column here (docs/fidelity.md, "Fitted constants").
#include "hardware/framework.h"

namespace zplan::hardware {

const FrameworkSpec& fitted_framework() {
  static const FrameworkSpec kFitted = [] {
    FrameworkSpec f;
    // [fitted] PyTorch's per-operator dispatch overhead is commonly measured at ~5-20 us; the fit
    // is bounded to 3-40 us (tests/fidelity/fit.json). Fitted at its upper bound before causal
    // attention was charged half its s^2 work; with it, the fit lands inside the measured range.
    f.host_op_s = 3.8e-6;
    // [fitted, at its lower bound 1 ms] once the passes of the optimizer step are charged, the
    // set leaves no fixed per-step host time to explain.
    f.step_overhead_s = 0.001;
    // [fitted, at its upper bound 1: no loss] DeepSpeed PR #7474 measured --bind_cores_to_rank
    // 1.3x faster on a ZeRO-Offload step; the set's offload cases do not support a loss (the
    // H200 runs with 14 cores per rank need the full rate).
    f.cpu_oversubscription_efficiency = 1.0;
    return f;
  }();
  return kFitted;
}

}  // namespace zplan::hardware
