// fp32 GEMM on the CPU: the compute kernel of a CPU-only training run.
//
// C[m x n] = op(A) op(B), row-major, beta = 0, where op(A) is m x k and op(B) is k x n. Built
// against BLAS (cblas_sgemm; OpenBLAS from Debian) when the build has it (ZPLAN_HAVE_BLAS,
// kernels/cpu_gemm_blas.cc), else plain loops (kernels/cpu_gemm_loops.cc). `zplan calibrate`
// times exactly this function for the profile's GEMM curve, and zplan's reference executor calls
// it for its GEMMs, so that both see the same library and thread count.
#ifndef ZPLAN_KERNELS_CPU_GEMM_H_
#define ZPLAN_KERNELS_CPU_GEMM_H_

#include <cstdint>
#include <string>

namespace zplan::kernels {

// C = op(A) op(B). lda/ldb/ldc are the row strides of A, B and C as stored.
void cpu_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
               int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);

// Threads the GEMMs of this process use from now on (OpenBLAS: openblas_set_num_threads, which
// is process-wide). REQUIRES: threads >= 1.
void set_cpu_gemm_threads(int threads);

// What computes the GEMMs, e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64"
// or "zplan loops (no BLAS in this build)".
std::string cpu_gemm_library();

}  // namespace zplan::kernels

#endif  // ZPLAN_KERNELS_CPU_GEMM_H_
