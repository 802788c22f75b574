// cpu_gemm.h on CBLAS (built when ZPLAN_HAVE_BLAS).
#include <cblas.h>

#include "kernels/cpu_gemm.h"

namespace zplan::kernels {

void cpu_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
               int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
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
