// fp32 GEMM on the CPU: the compute kernel of a CPU-only training run.
//
// C[m x n] = alpha op(A) op(B) + beta C, row-major, where op(A) is m x k and op(B) is k x n.
// Built against BLAS (cblas_sgemm; OpenBLAS from Debian) when the build has it (ZPLAN_HAVE_BLAS,
// kernels/cpu_gemm_blas.cc), else plain loops (kernels/cpu_gemm_loops.cc). `zplan calibrate`
// times exactly this function for the profile's GEMM curve, and the reference executor's CPU
// device (executor/device_cpu.cc) calls it for its GEMMs, so that both see the same library and
// thread count.
#ifndef ZPLAN_KERNELS_CPU_GEMM_H_
#define ZPLAN_KERNELS_CPU_GEMM_H_

#include <cstdint>
#include <string>

namespace zplan::kernels {

// C = alpha op(A) op(B) + beta C, op(X) = X or X^T. lda/ldb/ldc are the row strides of A, B and
// C as stored. With beta == 0, C is only written (it may hold anything before).
void cpu_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
               int64_t ldc);

// Threads the GEMMs of this process use from now on (OpenBLAS: openblas_set_num_threads, which
// is process-wide). REQUIRES: threads >= 1.
void set_cpu_gemm_threads(int threads);

// What computes the GEMMs, e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64"
// or "zplan loops (no BLAS in this build)".
std::string cpu_gemm_library();

}  // namespace zplan::kernels

#endif  // ZPLAN_KERNELS_CPU_GEMM_H_
