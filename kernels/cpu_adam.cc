#include "kernels/cpu_adam.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <thread>
#include <vector>

#include <immintrin.h>

namespace zplan::kernels {

AdamCoeffs adam_coeffs(const AdamHyper& h, int64_t step) {
  AdamCoeffs c;
  c.beta1 = h.beta1;
  c.one_minus_beta1 = 1 - h.beta1;
  c.beta2 = h.beta2;
  c.one_minus_beta2 = 1 - h.beta2;
  c.eps = h.eps;
  const float bc1 = 1 - static_cast<float>(std::pow(h.beta1, double(step)));
  c.step_size = -h.lr / bc1;
  c.bias_correction2 = 1 / std::sqrt(1 - static_cast<float>(std::pow(h.beta2, double(step))));
  c.w_decay = -h.lr * h.weight_decay;
  c.l2 = h.weight_decay;
  c.decoupled = h.weight_decay > 0 && h.adamw_mode;
  c.coupled = h.weight_decay > 0 && !h.adamw_mode;
  return c;
}

namespace {

using Coeffs = AdamCoeffs;

// DeepSpeed's scalar loop (the tail of Step_1).
void adam_scalar(const Coeffs& c, float* p, const float* g, float* m, float* v, int64_t begin,
                 int64_t end) {
  for (int64_t k = begin; k < end; ++k) {
    float grad = g[k];
    float param = p[k];
    float momentum = m[k];
    float variance = v[k];
    if (c.coupled) grad = param * c.l2 + grad;
    momentum = momentum * c.beta1;
    momentum = grad * c.one_minus_beta1 + momentum;
    variance = variance * c.beta2;
    grad = grad * grad;
    variance = grad * c.one_minus_beta2 + variance;
    grad = std::sqrt(variance);
    grad = grad * c.bias_correction2 + c.eps;
    grad = momentum / grad;
    if (c.decoupled) param += c.w_decay * param;
    param = grad * c.step_size + param;
    p[k] = param;
    m[k] = momentum;
    v[k] = variance;
  }
}

__attribute__((target("avx2,fma"))) void adam_avx2(const Coeffs& c, float* p, const float* g,
                                                   float* m, float* v, int64_t begin, int64_t end) {
  const __m256 beta1 = _mm256_set1_ps(c.beta1), omb1 = _mm256_set1_ps(c.one_minus_beta1);
  const __m256 beta2 = _mm256_set1_ps(c.beta2), omb2 = _mm256_set1_ps(c.one_minus_beta2);
  const __m256 eps = _mm256_set1_ps(c.eps), bc2 = _mm256_set1_ps(c.bias_correction2);
  const __m256 step = _mm256_set1_ps(c.step_size), wd = _mm256_set1_ps(c.w_decay);
  const __m256 l2 = _mm256_set1_ps(c.l2);
  int64_t k = begin;
  for (; k + 8 <= end; k += 8) {
    __m256 grad = _mm256_loadu_ps(g + k);
    __m256 param = _mm256_loadu_ps(p + k);
    __m256 momentum = _mm256_loadu_ps(m + k);
    __m256 variance = _mm256_loadu_ps(v + k);
    if (c.coupled) grad = _mm256_fmadd_ps(param, l2, grad);
    momentum = _mm256_mul_ps(momentum, beta1);
    momentum = _mm256_fmadd_ps(grad, omb1, momentum);
    variance = _mm256_mul_ps(variance, beta2);
    grad = _mm256_mul_ps(grad, grad);
    variance = _mm256_fmadd_ps(grad, omb2, variance);
    grad = _mm256_sqrt_ps(variance);
    grad = _mm256_fmadd_ps(grad, bc2, eps);
    grad = _mm256_div_ps(momentum, grad);
    if (c.decoupled) param = _mm256_fmadd_ps(param, wd, param);
    param = _mm256_fmadd_ps(grad, step, param);
    _mm256_storeu_ps(p + k, param);
    _mm256_storeu_ps(m + k, momentum);
    _mm256_storeu_ps(v + k, variance);
  }
  adam_scalar(c, p, g, m, v, k, end);
}

// GCC 12 warns that _mm512_sqrt_ps reads an uninitialized register (its _mm512_undefined_ps
// pass-through operand, unused with an all-ones mask): a known false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) void adam_avx512(const Coeffs& c, float* p, const float* g,
                                                    float* m, float* v, int64_t begin,
                                                    int64_t end) {
  const __m512 beta1 = _mm512_set1_ps(c.beta1), omb1 = _mm512_set1_ps(c.one_minus_beta1);
  const __m512 beta2 = _mm512_set1_ps(c.beta2), omb2 = _mm512_set1_ps(c.one_minus_beta2);
  const __m512 eps = _mm512_set1_ps(c.eps), bc2 = _mm512_set1_ps(c.bias_correction2);
  const __m512 step = _mm512_set1_ps(c.step_size), wd = _mm512_set1_ps(c.w_decay);
  const __m512 l2 = _mm512_set1_ps(c.l2);
  int64_t k = begin;
  for (; k + 16 <= end; k += 16) {
    __m512 grad = _mm512_loadu_ps(g + k);
    __m512 param = _mm512_loadu_ps(p + k);
    __m512 momentum = _mm512_loadu_ps(m + k);
    __m512 variance = _mm512_loadu_ps(v + k);
    if (c.coupled) grad = _mm512_fmadd_ps(param, l2, grad);
    momentum = _mm512_mul_ps(momentum, beta1);
    momentum = _mm512_fmadd_ps(grad, omb1, momentum);
    variance = _mm512_mul_ps(variance, beta2);
    grad = _mm512_mul_ps(grad, grad);
    variance = _mm512_fmadd_ps(grad, omb2, variance);
    grad = _mm512_sqrt_ps(variance);
    grad = _mm512_fmadd_ps(grad, bc2, eps);
    grad = _mm512_div_ps(momentum, grad);
    if (c.decoupled) param = _mm512_fmadd_ps(param, wd, param);
    param = _mm512_fmadd_ps(grad, step, param);
    _mm512_storeu_ps(p + k, param);
    _mm512_storeu_ps(m + k, momentum);
    _mm512_storeu_ps(v + k, variance);
  }
  adam_scalar(c, p, g, m, v, k, end);
}
#pragma GCC diagnostic pop

void adam_range(SimdIsa isa, const Coeffs& c, float* p, const float* g, float* m, float* v,
                int64_t begin, int64_t end) {
  switch (isa) {
    case SimdIsa::kAvx512:
      adam_avx512(c, p, g, m, v, begin, end);
      return;
    case SimdIsa::kAvx2:
      adam_avx2(c, p, g, m, v, begin, end);
      return;
    case SimdIsa::kScalar:
      adam_scalar(c, p, g, m, v, begin, end);
      return;
  }
}

}  // namespace

const char* isa_name(SimdIsa isa) {
  switch (isa) {
    case SimdIsa::kAvx512:
      return "avx512";
    case SimdIsa::kAvx2:
      return "avx2";
    case SimdIsa::kScalar:
      return "scalar";
  }
  return "?";
}

SimdIsa best_isa() {
  static const SimdIsa kBest = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return SimdIsa::kAvx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return SimdIsa::kAvx2;
    return SimdIsa::kScalar;
  }();
  return kBest;
}

void adam_step(const AdamHyper& hyper, int64_t step, float* param, const float* grad,
               float* exp_avg, float* exp_avg_sq, int64_t n, int threads, SimdIsa isa) {
  assert(threads >= 1 && step >= 1);
  const Coeffs c = adam_coeffs(hyper, step);
  // Chunks start on 64-byte lines (16 floats) so that threads never share a cache line; every
  // element takes the same arithmetic path whatever the split, so results do not depend on it.
  constexpr int64_t kLine = 16;
  const int64_t per = ((n + threads - 1) / threads + kLine - 1) / kLine * kLine;
  std::vector<std::thread> workers;
  for (int t = 1; t < threads && t * per < n; ++t) {
    int64_t begin = t * per;
    int64_t end = std::min(n, begin + per);
    workers.emplace_back(adam_range, isa, c, param, grad, exp_avg, exp_avg_sq, begin, end);
  }
  adam_range(isa, c, param, grad, exp_avg, exp_avg_sq, 0, std::min(n, per));
  for (std::thread& w : workers) w.join();
}

}  // namespace zplan::kernels
