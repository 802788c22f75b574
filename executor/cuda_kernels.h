// The CUDA executor device's elementwise kernels (executor/cuda_kernels.cu): the few
// operations of a training step that cuBLAS does not offer, launched on `stream`, asynchronous.
// Pointers are device-accessible (device, managed or pinned host memory); sizes in floats.
// Built only with ZPLAN_HAVE_CUDA_EXECUTOR.
#ifndef ZPLAN_EXECUTOR_CUDA_KERNELS_H_
#define ZPLAN_EXECUTOR_CUDA_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cpu_adam.h"

namespace zplan::executor::cuda {

// y[r, c] = row[c] for r < rows, c < cols.
void fill_rows(cudaStream_t s, float* y, const float* row, int64_t rows, int64_t cols);
void relu(cudaStream_t s, float* y, size_t n);
// dy *= (y > 0).
void relu_backward(cudaStream_t s, float* dy, const float* y, size_t n);
// out[c] (+)= sum over rows of x[r, c].
void column_sums(cudaStream_t s, const float* x, int64_t rows, int64_t cols, float* out,
                 bool accumulate);
// *sum_sq += sum((y - target)^2) in double (atomically, so *sum_sq must be zeroed first); with dy
// != nullptr also dy = scale * (y - target).
void squared_error(cudaStream_t s, float* dy, const float* y, const float* target, size_t n,
                   float scale, double* sum_sq);
// y = a * x + b * y.
void axpby(cudaStream_t s, float* y, const float* x, size_t n, float a, float b);
// dst = scale * src, or dst += scale * src with add.
void scale_copy(cudaStream_t s, float* dst, const float* src, size_t n, float scale, bool add);
// buf[i] *= unit for i < n: a read and a write of every element.
void memory_pass(cudaStream_t s, float* buf, size_t n, float unit);
// DeepSpeed's Step_1 with the constants of kernels/cpu_adam.h, operation for operation (fused
// multiply-adds where the AVX kernel has them).
void adam(cudaStream_t s, const kernels::AdamCoeffs& c, float* param, const float* grad,
          float* exp_avg, float* exp_avg_sq, int64_t n);

}  // namespace zplan::executor::cuda

#endif  // ZPLAN_EXECUTOR_CUDA_KERNELS_H_
