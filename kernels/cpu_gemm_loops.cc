// cpu_gemm.h without BLAS: straightforward loops over rows of C, split over threads (built when
// the build has no BLAS; slow, but the profile then measures what the executor will run).
#include <algorithm>
#include <functional>
#include <thread>
#include <vector>

#include "kernels/cpu_gemm.h"

namespace zplan::kernels {

namespace {

int g_threads = 1;  // set_cpu_gemm_threads is process-wide, as OpenBLAS's is

struct Gemm {
  bool trans_a, trans_b;
  int64_t n, k;
  float alpha;
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  float beta;
  float* c;
  int64_t ldc;
};

// Rows [r0, r1) of C.
void rows(const Gemm& g, int64_t r0, int64_t r1) {
  for (int64_t i = r0; i < r1; ++i) {
    float* ci = g.c + i * g.ldc;
    if (g.beta == 0.0f) {
      std::fill(ci, ci + g.n, 0.0f);
    } else {
      for (int64_t j = 0; j < g.n; ++j) ci[j] *= g.beta;
    }
    for (int64_t p = 0; p < g.k; ++p) {
      const float aip = g.alpha * (g.trans_a ? g.a[p * g.lda + i] : g.a[i * g.lda + p]);
      if (g.trans_b) {
        for (int64_t j = 0; j < g.n; ++j) ci[j] += aip * g.b[j * g.ldb + p];
      } else {
        const float* bp = g.b + p * g.ldb;
        for (int64_t j = 0; j < g.n; ++j) ci[j] += aip * bp[j];
      }
    }
  }
}

}  // namespace

void cpu_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
               int64_t ldc) {
  const Gemm g{trans_a, trans_b, n, k, alpha, a, lda, b, ldb, beta, c, ldc};
  const int threads = static_cast<int>(std::min<int64_t>(g_threads, std::max<int64_t>(1, m)));
  const int64_t per = (m + threads - 1) / threads;
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) {
    int64_t r0 = t * per, r1 = std::min(m, r0 + per);
    if (r0 < r1) workers.emplace_back(rows, std::cref(g), r0, r1);
  }
  rows(g, 0, std::min(m, per));
  for (std::thread& w : workers) w.join();
}

void set_cpu_gemm_threads(int threads) { g_threads = std::max(1, threads); }

std::string cpu_gemm_library() { return "zplan loops (no BLAS in this build)"; }

}  // namespace zplan::kernels
