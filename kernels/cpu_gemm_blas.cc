// cpu_gemm.h on CBLAS (built when ZPLAN_HAVE_BLAS).
#include <cblas.h>

#include "kernels/cpu_gemm.h"

namespace zplan::kernels {

void cpu_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
               int64_t ldc) {
  // The row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T, which is what
  // OpenBLAS's cblas_sgemm turns a row-major call into before its kernels run. Calling that form
  // directly gives the same kernels and sums, and skips the one path a row-major call can take
  // instead: interface/gemm.c's SGEMM_DIRECT shortcut (row-major, no transposes, alpha 1, beta 0,
  // small sizes), which only AVX-512 CPUs run (SkylakeX and later kernels), so that every core
  // type computes the executor's GEMMs one way.
  cblas_sgemm(CblasColMajor, trans_b ? CblasTrans : CblasNoTrans,
              trans_a ? CblasTrans : CblasNoTrans, static_cast<int>(n), static_cast<int>(m),
              static_cast<int>(k), alpha, b, static_cast<int>(ldb), a, static_cast<int>(lda), beta,
              c, static_cast<int>(ldc));
}

void set_cpu_gemm_threads(int threads) {
#ifdef OPENBLAS_VERSION
  openblas_set_num_threads(threads);
#else
  (void)threads;  // other BLAS libraries read their thread count from the environment
#endif
}

std::string cpu_gemm_library() {
#ifdef OPENBLAS_VERSION
  std::string config = openblas_get_config();
  while (!config.empty() && config.back() == ' ') config.pop_back();
  return config;
#else
  return "CBLAS";
#endif
}

}  // namespace zplan::kernels
