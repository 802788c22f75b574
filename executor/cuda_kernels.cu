// The CUDA executor device's elementwise kernels: grid-stride loops of 256 threads.
#include <algorithm>

#include "executor/cuda_kernels.h"

namespace zplan::executor::cuda {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(b, 8192)));
}

__global__ void fill_rows_kernel(float* y, const float* row, int64_t rows, int64_t cols) {
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    y[i] = row[i % static_cast<size_t>(cols)];
  }
}

__global__ void relu_kernel(float* y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    y[i] = y[i] > 0 ? y[i] : 0.0f;
  }
}

__global__ void relu_backward_kernel(float* dy, const float* y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    dy[i] = y[i] > 0 ? dy[i] : 0.0f;
  }
}

// One thread per column, walking down the rows (neighbouring threads read neighbouring floats).
__global__ void column_sums_kernel(const float* x, int64_t rows, int64_t cols, float* out,
                                   bool accumulate) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < cols;
       c += int64_t(gridDim.x) * blockDim.x) {
    float s = accumulate ? out[c] : 0.0f;
    for (int64_t r = 0; r < rows; ++r) s += x[r * cols + c];
    out[c] = s;
  }
}

__global__ void squared_error_kernel(float* dy, const float* y, const float* target, size_t n,
                                     float scale, double* sum_sq) {
  __shared__ double partial[kThreads];
  double s = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const float d = y[i] - target[i];
    s += double(d) * d;
    if (dy != nullptr) dy[i] = scale * d;
  }
  partial[threadIdx.x] = s;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(sum_sq, partial[0]);
}

__global__ void axpby_kernel(float* y, const float* x, size_t n, float a, float b) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    y[i] = a * x[i] + b * y[i];
  }
}

__global__ void scale_copy_kernel(float* dst, const float* src, size_t n, float scale, bool add) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    dst[i] = add ? dst[i] + scale * src[i] : scale * src[i];
  }
}

__global__ void memory_pass_kernel(float* buf, size_t n, float unit) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    buf[i] = buf[i] * unit;
  }
}

__global__ void adam_kernel(kernels::AdamCoeffs c, float* p, const float* g, float* m, float* v,
                            int64_t n) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    float grad = g[k];
    float param = p[k];
    float momentum = m[k];
    float variance = v[k];
    if (c.coupled) grad = fmaf(param, c.l2, grad);
    momentum = momentum * c.beta1;
    momentum = fmaf(grad, c.one_minus_beta1, momentum);
    variance = variance * c.beta2;
    grad = grad * grad;
    variance = fmaf(grad, c.one_minus_beta2, variance);
    grad = sqrtf(variance);
    grad = fmaf(grad, c.bias_correction2, c.eps);
    grad = momentum / grad;
    if (c.decoupled) param = fmaf(param, c.w_decay, param);
    param = fmaf(grad, c.step_size, param);
    p[k] = param;
    m[k] = momentum;
    v[k] = variance;
  }
}

}  // namespace

void fill_rows(cudaStream_t s, float* y, const float* row, int64_t rows, int64_t cols) {
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  if (n == 0) return;
  fill_rows_kernel<<<blocks_for(n), kThreads, 0, s>>>(y, row, rows, cols);
}

void relu(cudaStream_t s, float* y, size_t n) {
  if (n == 0) return;
  relu_kernel<<<blocks_for(n), kThreads, 0, s>>>(y, n);
}

void relu_backward(cudaStream_t s, float* dy, const float* y, size_t n) {
  if (n == 0) return;
  relu_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(dy, y, n);
}

void column_sums(cudaStream_t s, const float* x, int64_t rows, int64_t cols, float* out,
                 bool accumulate) {
  if (cols <= 0) return;
  column_sums_kernel<<<blocks_for(static_cast<size_t>(cols)), kThreads, 0, s>>>(x, rows, cols, out,
                                                                                accumulate);
}

void squared_error(cudaStream_t s, float* dy, const float* y, const float* target, size_t n,
                   float scale, double* sum_sq) {
  if (n == 0) return;
  squared_error_kernel<<<blocks_for(n), kThreads, 0, s>>>(dy, y, target, n, scale, sum_sq);
}

void axpby(cudaStream_t s, float* y, const float* x, size_t n, float a, float b) {
  if (n == 0) return;
  axpby_kernel<<<blocks_for(n), kThreads, 0, s>>>(y, x, n, a, b);
}

void scale_copy(cudaStream_t s, float* dst, const float* src, size_t n, float scale, bool add) {
  if (n == 0) return;
  scale_copy_kernel<<<blocks_for(n), kThreads, 0, s>>>(dst, src, n, scale, add);
}

void memory_pass(cudaStream_t s, float* buf, size_t n, float unit) {
  if (n == 0) return;
  memory_pass_kernel<<<blocks_for(n), kThreads, 0, s>>>(buf, n, unit);
}

void adam(cudaStream_t s, const kernels::AdamCoeffs& c, float* param, const float* grad,
          float* exp_avg, float* exp_avg_sq, int64_t n) {
  if (n <= 0) return;
  adam_kernel<<<blocks_for(static_cast<size_t>(n)), kThreads, 0, s>>>(c, param, grad, exp_avg,
                                                                      exp_avg_sq, n);
}

}  // namespace zplan::executor::cuda
