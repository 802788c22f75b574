// The CPU GEMM that calibration times and the executor's CPU device runs (kernels/cpu_gemm.h):
// exact on small integers-and-halves, whatever the library (BLAS or loops) and thread count.
#include "kernels/cpu_gemm.h"

#include <vector>

#include <catch2/catch.hpp>

namespace zplan::kernels {
namespace {

TEST_CASE("cpu_sgemm computes alpha op(A) op(B) + beta C, row-major",
          "[kernels][gemm][blas]") {
  const int64_t m = 5, n = 7, k = 3;
  std::vector<float> a(m * k), b(k * n);
  for (int64_t i = 0; i < m * k; ++i) a[i] = float(i % 5) - 1;
  for (int64_t i = 0; i < k * n; ++i) b[i] = float(i % 3) + 0.5f;
  std::vector<float> want(m * n, 0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) want[i * n + j] += a[i * k + p] * b[p * n + j];
  // Transposed storage: A^T stored as k x m, B^T as n x k.
  std::vector<float> at(k * m), bt(n * k);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) at[p * m + i] = a[i * k + p];
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) bt[j * k + p] = b[p * n + j];
  for (int threads : {1, 2}) {
    set_cpu_gemm_threads(threads);
    // beta = 0 writes C whatever it held.
    std::vector<float> c(m * n, -1);
    cpu_sgemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    CHECK(c == want);
    std::vector<float> c2(m * n, -1);
    cpu_sgemm(true, true, m, n, k, 1.0f, at.data(), m, bt.data(), k, 0.0f, c2.data(), n);
    CHECK(c2 == want);
    // C = 2 op(A) op(B) + 0.5 C on C = 4: every product is a multiple of 0.5 and small, so the
    // sums are exact in fp32 in any order.
    std::vector<float> c3(m * n, 4.0f), want3(m * n);
    for (size_t i = 0; i < want.size(); ++i) want3[i] = 2 * want[i] + 2.0f;
    cpu_sgemm(false, true, m, n, k, 2.0f, a.data(), k, bt.data(), k, 0.5f, c3.data(), n);
    CHECK(c3 == want3);
  }
  set_cpu_gemm_threads(1);
  CHECK(!cpu_gemm_library().empty());
}

}  // namespace
}  // namespace zplan::kernels
