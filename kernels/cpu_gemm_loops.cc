// cpu_gemm.h without BLAS: straightforward loops over rows of C, split over threads (built when
// the build has no BLAS; slow, but the profile then measures what the executor will run).
#include <algorithm>
#include <thread>
#include <vector>

#include "kernels/cpu_gemm.h"

namespace zplan::kernels {

namespace {

int g_threads = 1;  // set_cpu_gemm_threads is process-wide, as OpenBLAS's is

void rows(bool trans_a, bool trans_b, int64_t r0, int64_t r1, int64_t n, int64_t k, const float* a,
          int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  for (int64_t i = r0; i < r1; ++i) {
    float* ci = c + i * ldc;
    std::fill(ci, ci + n, 0.0f);
    for (int64_t p = 0; p < k; ++p) {
      const float aip = trans_a ? a[p * lda + i] : a[i * lda + p];
      if (trans_b) {
        for (int64_t j = 0; j < n; ++j) ci[j] += aip * b[j * ldb + p];
      } else {
        const float* bp = b + p * ldb;
        for (int64_t j = 0; j < n; ++j) ci[j] += aip * bp[j];
      }
    }
  }
}

}  // namespace

void cpu_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
               int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  const int threads = static_cast<int>(std::min<int64_t>(g_threads, std::max<int64_t>(1, m)));
  const int64_t per = (m + threads - 1) / threads;
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) {
    int64_t r0 = t * per, r1 = std::min(m, r0 + per);
    if (r0 < r1) workers.emplace_back(rows, trans_a, trans_b, r0, r1, n, k, a, lda, b, ldb, c, ldc);
  }
  rows(trans_a, trans_b, 0, std::min(m, per), n, k, a, lda, b, ldb, c, ldc);
  for (std::thread& w : workers) w.join();
}

void set_cpu_gemm_threads(int threads) { g_threads = std::max(1, threads); }

std::string cpu_gemm_library() { return "zplan loops (no BLAS in this build)"; }

}  // namespace zplan::kernels
