// The reference executor's MLP run (tiny-mlp*: Linear + ReLU layers, MSE loss, Adam), rebuilt in
// double precision, with a bound on how far an fp32 execution of it can land from it.
//
// Why: the executor trains in fp32, and every stage, accumulation count and BLAS kernel sums in
// its own order, so two correct configurations differ in the last bits; Adam's m / (sqrt(v) +
// eps) then turns a last-bit difference in a near-zero gradient into a change of up to lr. A
// fixed tolerance between two fp32 runs is not sound. Instead every run is compared with this
// double-precision run (its own rounding, ~1e-16 relative, is negligible at fp32's scale), each
// weight within its own bound, derived as follows.
//
// 1. Rounding model (Higham and Mary, "A new approach to probabilistic rounding error analysis",
//    SIAM J. Sci. Comput. 41(5), 2019, Thm 2.4): the rounding errors of successive operations are
//    mean-independent with |delta| <= u = 2^-24. A sum of n terms, in ANY order (blocked, SIMD,
//    with or without FMA: every kernel of every CPU), then errs by at most lambda sqrt(n) u sum
//    |terms| except with probability 2n exp(-lambda^2 / 2). Its standard deviation is at most
//    sqrt(n) u sum |terms|; we carry such a sigma for every quantity, and errors that come from
//    different sums add in quadrature. The worst-case bound (n u instead of sqrt(n) u, absolute
//    instead of quadrature sums) is sound without the model but useless here: every layer's
//    row-wise L1 norm (~8) multiplies it, and after four layers it exceeds the gradients.
// 2. Propagation: a GEMM element, a column sum and a gradient summed over the rows, micro-steps
//    and ranks are sums as in 1 (the gradient's R rows + 2 for the accumulations), plus the
//    propagated errors of their inputs: sigma^2 += sum (e(a) b)^2 + (a e(b))^2. ReLU is
//    1-Lipschitz; its backward mask can flip only where |z| <= lambda e(z), and there the masked
//    gradient may be the whole incoming one (an absolute error |dy|: e += |dy| / lambda, as the
//    check multiplies every e by lambda). The loss gradient 2 (y - t) / (rows h)
//    is scaled by powers of two only (1 / gas, 1 / ranks: exact).
// 3. Adam, operation by operation as cpu_adam.h's scalar loop, with the fp32 coefficients
//    adam_coeffs gives every run: m and v are weighted sums (e(m) = b1 e(m) + (1 - b1) e(g), e(v)
//    = b2 e(v) + (1 - b2) 2 |g| e(g), plus u per operation); e(sqrt v) <= min(sqrt(e(v)), e(v) /
//    sqrt(v)); the quotient q = m / d: e(q) <= e(m) / d_low + |m| e(d) / (d d_low), and never more
//    than the absolute |q| + C_t / bc2 (Cauchy-Schwarz bounds |m| / sqrt(v) by C_t for any
//    gradients; divided by lambda as the flips are).
//    The numerics test runs Adam with eps = 1e-3, at least the largest gradient: then
//    m / (sqrt(v) + eps) is Lipschitz in the gradients with a constant below 2 / eps, so
//    rounding is not amplified (with DeepSpeed's 1e-8 the bound of a weight whose gradient is
//    near zero is lr, which is true but checks nothing). Partitioning, bucketing, reduction and
//    offload -- what the test is for -- do not depend on eps.
// 4. The check: |w - w_double| <= lambda sigma(w) with lambda = 10 (a sum's error is beyond it with
//    probability below 2n exp(-50), 1e-19 for n = 257; the 25% over lambda = 8 also covers the
//    second-order terms, products of two errors, each below 1e-3 of its quantity).
// After three steps the bound is below 3% of how far a weight moved for half of the weights and
// below a third for 90% of them (the test checks the first), while a missing, doubled or
// misplaced gradient slice changes its weights' movement by all of it (the test checks that a
// dropped slice fails).
#ifndef ZPLAN_TESTS_EXECUTOR_MLP_REFERENCE_H_
#define ZPLAN_TESTS_EXECUTOR_MLP_REFERENCE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu_adam.h"
#include "executor/data.h"

namespace zplan::testing {

struct MlpReference {
  std::vector<double> weights;  // model order: W0 (out x in, row-major), b0, W1, b1, ...
  std::vector<double> bound;    // lambda sigma(weight): how far an fp32 run can be from `weights`
  std::vector<double> loss;     // mean MSE of each optimizer step, before its update
  std::vector<double> loss_bound;
};

// A deliberately wrong reference (tests of the check itself): the gradient of
// weights [drop_begin, drop_end) is taken as zero in every step.
struct MlpFault {
  int64_t drop_begin = 0;
  int64_t drop_end = 0;
};

// `layers` x Linear(h, h) (+ ReLU but after the last), trained for `steps` (0: the initial
// weights) optimizer steps on
// `rows` rows per step (the global batch) from the executor's initial weights and data
// (executor/data.h), with the MSE loss averaged over the rows and columns and `adam`.
inline MlpReference mlp_reference(int layers, int64_t h, int64_t rows, int steps, uint64_t seed,
                                  const kernels::AdamHyper& adam, const MlpFault& fault = {}) {
  constexpr double u = 1.0 / 16777216.0;  // fp32 unit roundoff, 2^-24
  constexpr double kLambda = 10;
  auto sq = [](double x) { return x * x; };
  // The standard deviation of the rounding error of a sum of n terms of absolute sum `abs`.
  auto local = [](size_t n, double abs) { return std::sqrt(double(n)) * u * abs; };
  const size_t H = static_cast<size_t>(h), R = static_cast<size_t>(rows);
  const size_t per_layer = H * H + H;
  const size_t P = per_layer * static_cast<size_t>(layers);
  MlpReference ref;
  std::vector<double>& w = ref.weights;
  std::vector<double>& ew = ref.bound;
  w.resize(P);
  ew.assign(P, 0.0);
  for (int l = 0; l < layers; ++l) {
    for (int part = 0; part < 2; ++part) {
      const int id = 2 * l + part;
      const size_t n = part == 0 ? H * H : H;
      const size_t off = static_cast<size_t>(l) * per_layer + (part == 0 ? 0 : H * H);
      for (size_t i = 0; i < n; ++i) {
        w[off + i] =
            executor::initial_weight(seed, id, static_cast<int64_t>(i), true, part == 0, h);
      }
    }
  }
  std::vector<double> m(P, 0.0), v(P, 0.0), em(P, 0.0), ev(P, 0.0), g(P), eg(P);
  // Activations per layer: z (pre-ReLU) and its bound; a = the layer's output.
  std::vector<std::vector<double>> a(static_cast<size_t>(layers) + 1), ea(a.size()),
      z(static_cast<size_t>(layers)), ez(z.size());
  for (int step = 0; step < steps; ++step) {
    // Forward.
    a[0].resize(R * H);
    ea[0].assign(R * H, 0.0);  // the data are fp32 values: exact
    std::vector<double> target(R * H);
    for (size_t r = 0; r < R; ++r) {
      const uint64_t row = static_cast<uint64_t>(step) * R + r;
      for (size_t c = 0; c < H; ++c) {
        a[0][r * H + c] = executor::mlp_input(seed, row, static_cast<int64_t>(c));
        target[r * H + c] = executor::mlp_target(seed, row, static_cast<int64_t>(c));
      }
    }
    for (int l = 0; l < layers; ++l) {
      const size_t L = static_cast<size_t>(l);
      const double* W = w.data() + L * per_layer;
      const double* eW = ew.data() + L * per_layer;
      const double* b = W + H * H;
      const double* eb = eW + H * H;
      const std::vector<double>&x = a[L], &ex = ea[L];
      z[L].resize(R * H);
      ez[L].resize(R * H);
      for (size_t r = 0; r < R; ++r) {
        for (size_t o = 0; o < H; ++o) {
          double s = b[o], abs = std::fabs(b[o]), prop = eb[o] * eb[o];
          for (size_t i = 0; i < H; ++i) {
            s += x[r * H + i] * W[o * H + i];
            abs += std::fabs(x[r * H + i] * W[o * H + i]);
            prop += sq(ex[r * H + i] * W[o * H + i]) + sq(x[r * H + i] * eW[o * H + i]);
          }
          z[L][r * H + o] = s;
          ez[L][r * H + o] = std::sqrt(sq(local(H + 1, abs)) + prop);
        }
      }
      a[L + 1] = z[L];
      ea[L + 1] = ez[L];
      if (l + 1 < layers) {
        for (double& y : a[L + 1]) y = std::max(y, 0.0);
      }
    }
    // Loss and its gradient.
    const std::vector<double>& y = a[static_cast<size_t>(layers)];
    const std::vector<double>& ey = ea[static_cast<size_t>(layers)];
    const double scale = 2.0 / static_cast<double>(R * H);
    double loss = 0, eloss = 0;
    std::vector<double> dy(R * H), edy(R * H);
    for (size_t k = 0; k < R * H; ++k) {
      const double d = y[k] - target[k];
      const double ed = ey[k] + u * std::fabs(d);
      loss += d * d;
      eloss += 2 * std::fabs(d) * ed + u * d * d;
      dy[k] = scale * d;
      edy[k] = scale * ed + u * std::fabs(dy[k]);
    }
    ref.loss.push_back(loss / static_cast<double>(R * H));
    ref.loss_bound.push_back(eloss / static_cast<double>(R * H));
    // Backward, from the last layer down.
    for (int l = layers - 1; l >= 0; --l) {
      const size_t L = static_cast<size_t>(l);
      if (l + 1 < layers) {
        for (size_t k = 0; k < R * H; ++k) {
          if (std::fabs(z[L][k]) <= kLambda * ez[L][k]) {
            // The mask may flip: an error of up to |dy|, which is absolute (not a sigma).
            edy[k] = std::fabs(dy[k]) / kLambda + edy[k];
          }
          if (z[L][k] <= 0) dy[k] = 0;
        }
      }
      const double* W = w.data() + L * per_layer;
      const double* eW = ew.data() + L * per_layer;
      const std::vector<double>&x = a[L], &ex = ea[L];
      double* gW = g.data() + L * per_layer;
      double* egW = eg.data() + L * per_layer;
      // Summed over the rows in any tree, and over micro-steps and ranks: R terms, plus the
      // accumulation into a zeroed buffer.
      for (size_t o = 0; o < H; ++o) {
        for (size_t i = 0; i < H; ++i) {
          double s = 0, abs = 0, prop = 0;
          for (size_t r = 0; r < R; ++r) {
            s += dy[r * H + o] * x[r * H + i];
            abs += std::fabs(dy[r * H + o] * x[r * H + i]);
            prop += sq(edy[r * H + o] * x[r * H + i]) + sq(dy[r * H + o] * ex[r * H + i]);
          }
          gW[o * H + i] = s;
          egW[o * H + i] = std::sqrt(sq(local(R + 2, abs)) + prop);
        }
        double s = 0, abs = 0, prop = 0;
        for (size_t r = 0; r < R; ++r) {
          s += dy[r * H + o];
          abs += std::fabs(dy[r * H + o]);
          prop += sq(edy[r * H + o]);
        }
        gW[H * H + o] = s;
        egW[H * H + o] = std::sqrt(sq(local(R + 2, abs)) + prop);
      }
      if (l == 0) break;
      std::vector<double> dx(R * H), edx(R * H);
      for (size_t r = 0; r < R; ++r) {
        for (size_t i = 0; i < H; ++i) {
          double s = 0, abs = 0, prop = 0;
          for (size_t o = 0; o < H; ++o) {
            s += dy[r * H + o] * W[o * H + i];
            abs += std::fabs(dy[r * H + o] * W[o * H + i]);
            prop += sq(edy[r * H + o] * W[o * H + i]) + sq(dy[r * H + o] * eW[o * H + i]);
          }
          dx[r * H + i] = s;
          edx[r * H + i] = std::sqrt(sq(local(H, abs)) + prop);
        }
      }
      dy = std::move(dx);
      edy = std::move(edx);
    }
    for (int64_t k = fault.drop_begin; k < fault.drop_end; ++k) {
      g[static_cast<size_t>(k)] = 0;
      eg[static_cast<size_t>(k)] = 0;
    }
    // Adam, operation by operation as cpu_adam.h's scalar loop, with the same fp32 coefficients.
    const kernels::AdamCoeffs c = kernels::adam_coeffs(adam, step + 1);
    const double b1 = c.beta1, omb1 = c.one_minus_beta1, b2 = c.beta2, omb2 = c.one_minus_beta2;
    const double bc2 = c.bias_correction2, eps = c.eps, step_size = c.step_size;
    // |m| / sqrt(v) <= C_t by Cauchy-Schwarz, for any gradients: m_t = sum_i (1 - b1) b1^(t-i)
    // g_i and v_t = sum_i (1 - b2) b2^(t-i) g_i^2 give C_t^2 = sum_i (1 - b1)^2 b1^(2(t-i)) /
    // ((1 - b2) b2^(t-i)). So |q| = |m| / (sqrt(v) bc2 + eps) <= C_t / bc2 = cap, in any run (with
    // 1e-5 relative room for the runs' own rounding of m and v).
    double c2 = 0;
    for (int i = 0; i <= step; ++i) {
      c2 += omb1 * omb1 * std::pow(b1, 2.0 * (step - i)) / (omb2 * std::pow(b2, step - i));
    }
    const double cap = std::sqrt(c2) / bc2 * (1 + 1e-5);
    for (size_t k = 0; k < P; ++k) {
      const double mk = b1 * m[k] + omb1 * g[k];
      em[k] = b1 * em[k] + omb1 * eg[k] + 2 * u * (b1 * std::fabs(m[k]) + omb1 * std::fabs(g[k]));
      const double vk = b2 * v[k] + omb2 * g[k] * g[k];
      ev[k] = b2 * ev[k] + omb2 * 2 * std::fabs(g[k]) * eg[k] + 3 * u * vk;
      m[k] = mk;
      v[k] = vk;
      const double s = std::sqrt(vk);
      const double es =
          (vk > 0 ? std::min(std::sqrt(ev[k]), ev[k] / s) : std::sqrt(ev[k])) + u * s;
      const double d = s * bc2 + eps;
      const double ed = bc2 * es + 2 * u * d;
      const double d_low = std::max(d - ed, eps / 2);
      const double q = mk / d;
      // Both runs' quotients are at most cap in magnitude (below), so they differ by at most
      // |q| + cap, however small the denominators.
      const double eq = std::min(em[k] / d_low + std::fabs(mk) * ed / (d * d_low),
                                 (std::fabs(q) + cap) / kLambda) +
                        u * std::fabs(q);
      const double wk = q * step_size + w[k];
      ew[k] += std::fabs(step_size) * eq + 2 * u * (std::fabs(q * step_size) + std::fabs(wk));
      w[k] = wk;
    }
  }
  for (double& e : ew) e *= kLambda;
  for (double& e : ref.loss_bound) e *= kLambda;
  return ref;
}

}  // namespace zplan::testing

#endif  // ZPLAN_TESTS_EXECUTOR_MLP_REFERENCE_H_
