// zplan's CPU Adam against DeepSpeed's formula computed in double precision, on every
// instruction set this CPU has, and independent of the thread count.
#include "kernels/cpu_adam.h"

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

namespace zplan::kernels {
namespace {

struct State {
  std::vector<float> p, g, m, v;
};

// Gradients of magnitude >= 1e-3 and L2 terms below 5e-4: no element's update hinges on a
// cancellation (g + wd p near 0 makes m / sqrt(v) ill-conditioned in any precision).
State initial(int64_t n) {
  State s;
  for (int64_t i = 0; i < n; ++i) {
    s.p.push_back(0.5f - 0.01f * float(i % 101));
    s.g.push_back((i % 2 ? 1.0f : -1.0f) * (0.001f + 0.002f * float(i % 17)));
    s.m.push_back(0.0f);
    s.v.push_back(0.0f);
  }
  return s;
}

// Adam_Optimizer::Step_1 (DeepSpeed csrc/includes/cpu_adam.h) in double precision.
void reference_step(const AdamHyper& h, int64_t t, std::vector<double>* p,
                    const std::vector<float>& g, std::vector<double>* m, std::vector<double>* v) {
  const double bc1 = 1 - std::pow(double(h.beta1), double(t));
  const double bc2 = 1 / std::sqrt(1 - std::pow(double(h.beta2), double(t)));
  for (size_t k = 0; k < p->size(); ++k) {
    double grad = g[k];
    if (h.weight_decay > 0 && !h.adamw_mode) grad += (*p)[k] * h.weight_decay;
    (*m)[k] = h.beta1 * (*m)[k] + (1 - double(h.beta1)) * grad;
    (*v)[k] = h.beta2 * (*v)[k] + (1 - double(h.beta2)) * grad * grad;
    double update = (*m)[k] / (std::sqrt((*v)[k]) * bc2 + h.eps);
    if (h.weight_decay > 0 && h.adamw_mode) (*p)[k] -= double(h.lr) * h.weight_decay * (*p)[k];
    (*p)[k] -= double(h.lr) / bc1 * update;
  }
}

std::vector<SimdIsa> supported() {
  std::vector<SimdIsa> isas = {SimdIsa::kScalar};
  if (best_isa() != SimdIsa::kScalar) isas.push_back(SimdIsa::kAvx2);
  if (best_isa() == SimdIsa::kAvx512) isas.push_back(SimdIsa::kAvx512);
  return isas;
}

TEST_CASE("CPU Adam follows DeepSpeed's arithmetic", "[kernels][adam]") {
  const bool adamw = GENERATE(true, false);
  AdamHyper h;
  h.lr = 1e-2f;
  h.weight_decay = 1e-3f;
  h.adamw_mode = adamw;
  const int64_t n = 1000 + 13;  // vector bodies and scalar tails
  for (SimdIsa isa : supported()) {
    INFO("isa " << isa_name(isa) << (adamw ? " AdamW" : " Adam + L2"));
    State s = initial(n);
    std::vector<double> p(s.p.begin(), s.p.end()), m(n, 0.0), v(n, 0.0);
    for (int64_t t = 1; t <= 3; ++t) {
      adam_step(h, t, s.p.data(), s.g.data(), s.m.data(), s.v.data(), n, 1, isa);
      reference_step(h, t, &p, s.g, &m, &v);
    }
    for (int64_t k = 0; k < n; ++k) {
      CHECK(s.p[k] == Approx(p[k]).epsilon(1e-5).margin(1e-7));
      CHECK(s.m[k] == Approx(m[k]).epsilon(1e-4).margin(1e-9));
      CHECK(s.v[k] == Approx(v[k]).epsilon(1e-4).margin(1e-12));
    }
  }
}

TEST_CASE("CPU Adam gives the same bits on any number of threads", "[kernels][adam]") {
  AdamHyper h;
  const int64_t n = 4099;
  State one = initial(n);
  adam_step(h, 1, one.p.data(), one.g.data(), one.m.data(), one.v.data(), n, 1);
  for (int threads : {2, 3, 7}) {
    State s = initial(n);
    adam_step(h, 1, s.p.data(), s.g.data(), s.m.data(), s.v.data(), n, threads);
    CHECK(s.p == one.p);
    CHECK(s.m == one.m);
    CHECK(s.v == one.v);
  }
}

TEST_CASE("CPU Adam handles fewer parameters than threads", "[kernels][adam]") {
  AdamHyper h;
  State s = initial(5);
  adam_step(h, 1, s.p.data(), s.g.data(), s.m.data(), s.v.data(), 5, 8);
  // Step 1 of Adam moves every parameter by about lr against the gradient's sign.
  State ref = initial(5);
  for (int k = 0; k < 5; ++k) {
    if (ref.g[k] != 0) CHECK(std::fabs(s.p[k] - ref.p[k]) == Approx(1e-3).epsilon(1e-3));
  }
}

}  // namespace
}  // namespace zplan::kernels
