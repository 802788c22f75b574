// zplan's CPU Adam: the fp32 Adam / AdamW update of DeepSpeedCPUAdam, vectorized.
//
// The arithmetic is DeepSpeed's Adam_Optimizer::Step_1 (csrc/includes/cpu_adam.h, the AVX kernel
// and its scalar tail), operation for operation:
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   p += -lr (weight decay, AdamW mode);  p += -lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 -
//   beta2^t) + eps)
// with L2 weight decay (g += wd p) instead in Adam mode. The kernel uses AVX-512 or AVX2+FMA when
// the CPU has them (chosen at run time, as DeepSpeed chooses at build time, SIMD width 16 / 8
// floats), else scalar code, and splits the parameters over `threads` threads in contiguous
// chunks (DeepSpeed's OpenMP loop over tiles). It reads p, g, m, v and writes p, m, v: 28 bytes
// per parameter (reference/nccl_hardware.md §6), so on most hosts it is DRAM-bound.
//
// `zplan calibrate` times exactly this code for the profile's CPU Adam rate, and zplan's
// reference executor calls it for its optimizer step, so both see the same kernel.
#ifndef ZPLAN_KERNELS_CPU_ADAM_H_
#define ZPLAN_KERNELS_CPU_ADAM_H_

#include <cstdint>

namespace zplan::kernels {

struct AdamHyper {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  bool adamw_mode = true;  // decoupled weight decay (AdamW); false: L2 added to the gradient
};

enum class SimdIsa { kScalar, kAvx2, kAvx512 };
const char* isa_name(SimdIsa isa);  // "scalar", "avx2", "avx512"
// The widest instruction set this CPU supports among the three.
SimdIsa best_isa();

// The per-step constants of DeepSpeed's Adam_Optimizer::Step_1, shared by this kernel and the
// CUDA executor device's, so that both compute the same update.
struct AdamCoeffs {
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float eps;
  float step_size;         // -lr / (1 - beta1^t)
  float bias_correction2;  // 1 / sqrt(1 - beta2^t)
  float w_decay;           // -lr * weight_decay (AdamW)
  float l2;                // weight_decay (Adam mode)
  bool decoupled;
  bool coupled;
};
AdamCoeffs adam_coeffs(const AdamHyper& hyper, int64_t step);

// Bytes one parameter's update moves: reads p, g, m, v and writes p, m, v (fp32).
inline constexpr double kAdamBytesPerParam = 28;

// Step `step` (>= 1, for bias correction) over n parameters, in place. `isa` must be supported by
// the CPU (best_isa() or narrower). Results do not depend on `threads`. REQUIRES: threads >= 1.
void adam_step(const AdamHyper& hyper, int64_t step, float* param, const float* grad,
               float* exp_avg, float* exp_avg_sq, int64_t n, int threads = 1,
               SimdIsa isa = best_isa());

}  // namespace zplan::kernels

#endif  // ZPLAN_KERNELS_CPU_ADAM_H_
