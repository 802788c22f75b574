// The fitted framework constants, and the one a measurement pins: the one place they live. Refit
// with
//   scripts/fidelity.sh --fit --markdown
// and copy the "fitted on all sources" column here (docs/fidelity.md, "Fitted constants").
#include "hardware/framework.h"

namespace zplan::hardware {

const FrameworkSpec& fitted_framework() {
  static const FrameworkSpec kFitted = [] {
    FrameworkSpec f;
    // [fitted] PyTorch's per-operator dispatch overhead is commonly measured at ~5-20 us; the fit
    // is bounded to 3-40 us (tests/fidelity/fit.json). Fitted at its upper bound before causal
    // attention was charged half its s^2 work; with it, near the measured range (4.63 us); since
    // every kernel of Hugging Face's eager RMSNorm, rotary and gelu_new chains counts as one
    // operator (the backward's, issued by the C++ autograd engine, cost less than a Python
    // call's), at its lower bound.
    f.host_op_s = 3e-6;
    // [fitted] the engine's fixed host time per optimizer step; 3.06 ms before the eager chains,
    // 19.9 ms with them (docs/fidelity.md, "What the eager elementwise chains changed").
    f.step_overhead_s = 0.0199;
    // [fitted] 800 us of Python per stage-3 module fetch-and-release, beyond its operators. Two
    // independent sources set it alike (docs/fidelity.md, "The stage-3 hooks' Python"): a 6.9 B
    // model at 512 tokens on 4 H100 (ds-bf16mw, DeepSpeed 0.18), host-bound, alone wants ~810 us,
    // and Llama-3-70B on 32 H100 (deepcompile25, 0.16.6+) alone ~850-900 us; each is predicted
    // within 5 % with the other left out.
    f.stage3_fetch_s = 800e-6;
    // [measured, not fitted] what an oversubscribed rank keeps of its fair share of the cores
    // (the deepspeed launcher leaves OMP_NUM_THREADS unset, so every rank's pool takes every
    // core). ds-corebind isolates it: the same 2-rank ZeRO-Offload step on a DGX A100 with and
    // without --bind_cores_to_rank, 2.887 s against 2.497 s (the blog's averages of three runs).
    // Only the CPU Adam differs between them; its bound time is the measured step less zplan's
    // non-Adam part (GPU work, copies, and the DRAM-bound unscale and 16-bit cast around the
    // Adam: 0.974 + 0.154 s), 1.369 s, so the unbound one, 1.369 + 0.390 s, runs at
    // 1.369 / 1.759 = 0.78 of it (DeepSpeed PR #7474's
    // single runs on the same host, 3084 / 2383 ms, give 0.65). Fitted to the absolute step
    // times instead, the search sends it to 0.44, absorbing that source's unexplained per-core
    // rate into this term against its own launcher pair (docs/fidelity.md).
    f.cpu_oversubscription_efficiency = 0.78;
    return f;
  }();
  return kFitted;
}

}  // namespace zplan::hardware
