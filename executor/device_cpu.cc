// The CPU device: GEMMs by kernels/cpu_gemm.h (BLAS, or plain loops without BLAS: the function
// calibration times), elementwise loops, memcpy copies, and the side-work gate that holds compute
// back while another resource uses the cores.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "executor/device.h"
#include "kernels/config.h"
#include "kernels/cpu_gemm.h"

namespace zplan::executor {

namespace {

class CpuDevice : public ExecutorDevice {
 public:
  CpuDevice(kernels::Comm* comm, const CpuDeviceOptions& options) : comm_(comm), options_(options) {
    kernels::set_cpu_gemm_threads(std::max(1, options.blas_threads));
  }

  std::string name() const override {
    std::string blas = "loops";
#if ZPLAN_HAVE_BLAS
    blas = kernels::cpu_gemm_library();  // "OpenBLAS 0.3.21 ...": its first two words
    blas = blas.substr(0, blas.find(' ', blas.find(' ') + 1));
#endif
    return "cpu (" + blas + ", " + std::to_string(options_.blas_threads) + " thread" +
           (options_.blas_threads == 1 ? "" : "s") + " per rank, adam " +
           kernels::isa_name(kernels::best_isa()) + ")";
  }
  RawMemory& raw_memory() override { return memory_; }
  kernels::Comm& comm() override { return *comm_; }

  void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
            int64_t lda, const float* b, int64_t ldb, float beta, float* c,
            int64_t ldc) override {
    if (m <= 0 || n <= 0) return;
    // Cut C into column blocks (each needs all of op(A) and a column block of op(B)), or row
    // blocks when C is tall, so that compute can stop for side work between blocks.
    const double flops = 2.0 * double(m) * double(n) * double(k);
    int64_t chunks = std::max<int64_t>(1, static_cast<int64_t>(flops / options_.chunk_flops));
    const bool by_rows = m > n;
    const int64_t dim = by_rows ? m : n;
    chunks = std::min<int64_t>(chunks, std::max<int64_t>(1, dim / 64));
    const int64_t step = (dim + chunks - 1) / chunks;
    for (int64_t lo = 0; lo < dim; lo += step) {
      const int64_t len = std::min(step, dim - lo);
      checkpoint();
      if (by_rows) {
        // Rows [lo, lo+len) of C use rows of op(A): A's rows, or A's columns when transposed.
        const float* a_part = ta ? a + lo : a + lo * lda;
        kernels::cpu_sgemm(ta, tb, len, n, k, alpha, a_part, lda, b, ldb, beta, c + lo * ldc, ldc);
      } else {
        // Columns [lo, lo+len) of C use columns of op(B): B's columns, or B's rows transposed.
        const float* b_part = tb ? b + lo * ldb : b + lo;
        kernels::cpu_sgemm(ta, tb, m, len, k, alpha, a, lda, b_part, ldb, beta, c + lo, ldc);
      }
    }
  }

  void fill_rows(float* y, const float* row, int64_t rows, int64_t cols) override {
    for_chunks(static_cast<size_t>(rows), static_cast<size_t>(cols) * 4, [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) std::memcpy(y + r * cols, row, cols * sizeof(float));
    });
  }

  void relu(float* y, size_t n) override {
    for_chunks(n, 8, [&](size_t i0, size_t i1) {
      for (size_t i = i0; i < i1; ++i) y[i] = y[i] > 0 ? y[i] : 0.0f;
    });
  }

  void relu_backward(float* dy, const float* y, size_t n) override {
    for_chunks(n, 12, [&](size_t i0, size_t i1) {
      for (size_t i = i0; i < i1; ++i) dy[i] = y[i] > 0 ? dy[i] : 0.0f;
    });
  }

  void column_sums(const float* x, int64_t rows, int64_t cols, float* out,
                   bool accumulate) override {
    if (!accumulate) std::memset(out, 0, static_cast<size_t>(cols) * sizeof(float));
    for_chunks(static_cast<size_t>(rows), static_cast<size_t>(cols) * 4, [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) {
        const float* xr = x + r * cols;
        for (int64_t c = 0; c < cols; ++c) out[c] += xr[c];
      }
    });
  }

  double mse_grad(float* dy, const float* y, const float* target, size_t n,
                  float scale) override {
    double sq = 0;
    for_chunks(n, 12, [&](size_t i0, size_t i1) {
      double s = 0;
      for (size_t i = i0; i < i1; ++i) {
        float d = y[i] - target[i];
        s += double(d) * d;
        dy[i] = scale * d;
      }
      sq += s;
    });
    return sq;
  }

  double squared_error(const float* y, const float* target, size_t n) override {
    double sq = 0;
    for_chunks(n, 8, [&](size_t i0, size_t i1) {
      double s = 0;
      for (size_t i = i0; i < i1; ++i) {
        double d = double(y[i]) - target[i];
        s += d * d;
      }
      sq += s;
    });
    return sq;
  }

  void axpby(float* y, const float* x, size_t n, float a, float b) override {
    for_chunks(n, 12, [&](size_t i0, size_t i1) {
      for (size_t i = i0; i < i1; ++i) y[i] = a * x[i] + b * y[i];
    });
  }

  void memory_pass(float* buf, double bytes) override {
    // Read and write bytes / 2 each: x = x * 1 + 0 is not folded away through volatile-free code
    // because the scale comes from a member the compiler cannot see through.
    const size_t n = static_cast<size_t>(bytes / 8);
    const float s = unit_;
    for_chunks(n, 8, [&](size_t i0, size_t i1) {
      for (size_t i = i0; i < i1; ++i) buf[i] = buf[i] * s;
    });
  }

  void adam(const kernels::AdamHyper& hyper, int64_t step, float* param, const float* grad,
            float* exp_avg, float* exp_avg_sq, int64_t n) override {
    // The same kernel as the CPU optimizer, in pieces so that side work can interrupt it.
    const int64_t piece = std::max<int64_t>(1, static_cast<int64_t>(options_.chunk_bytes / 28));
    for (int64_t i = 0; i < n; i += piece) {
      checkpoint();
      const int64_t len = std::min(piece, n - i);
      kernels::adam_step(hyper, step, param + i, grad + i, exp_avg + i, exp_avg_sq + i, len,
                         options_.blas_threads);
    }
  }

  void copy(float* dst, const float* src, size_t n) override {
    if (dst != src) std::memcpy(dst, src, n * sizeof(float));
  }

  void scale_copy(float* dst, const float* src, size_t n, float scale) override {
    if (scale == 1.0f) return copy(dst, src, n);
    for (size_t i = 0; i < n; ++i) dst[i] = scale * src[i];
  }

  void add_scaled(float* dst, const float* src, size_t n, float scale) override {
    if (scale == 1.0f) {
      for (size_t i = 0; i < n; ++i) dst[i] += src[i];
    } else {
      for (size_t i = 0; i < n; ++i) dst[i] += scale * src[i];
    }
  }

  void zero(float* dst, size_t n) override { std::memset(dst, 0, n * sizeof(float)); }

  void begin_side_work() override {
    if (!options_.pause_compute_for_side_work) return;
    std::lock_guard<std::mutex> lock(mu_);
    ++side_;
  }

  void end_side_work() override {
    if (!options_.pause_compute_for_side_work) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (--side_ == 0) cv_.notify_all();
  }

  double take_compute_wait_s() override {
    std::lock_guard<std::mutex> lock(mu_);
    double w = wait_s_;
    wait_s_ = 0;
    return w;
  }

 private:
  // Compute stops here while side work runs. Only compute-stream kernels call it (the optimizer
  // on the device is compute-stream work too).
  void checkpoint() {
    if (!options_.pause_compute_for_side_work) return;
    std::unique_lock<std::mutex> lock(mu_);
    if (side_ == 0) return;
    auto t0 = std::chrono::steady_clock::now();
    cv_.wait(lock, [&] { return side_ == 0; });
    wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  // Runs fn over [0, n) in pieces of about chunk_bytes (at `bytes_per_item` per item), with a
  // checkpoint before each.
  template <typename Fn>
  void for_chunks(size_t n, size_t bytes_per_item, Fn fn) {
    size_t piece = std::max<size_t>(1, static_cast<size_t>(options_.chunk_bytes) /
                                           std::max<size_t>(1, bytes_per_item));
    for (size_t i = 0; i < n; i += piece) {
      checkpoint();
      fn(i, std::min(n, i + piece));
    }
  }

  kernels::Comm* comm_;
  CpuDeviceOptions options_;
  HostRawMemory memory_;
  float unit_ = 1.0f;
  std::mutex mu_;
  std::condition_variable cv_;
  int side_ = 0;
  double wait_s_ = 0;
};

}  // namespace

std::unique_ptr<ExecutorDevice> make_cpu_device(kernels::Comm* comm,
                                                const CpuDeviceOptions& options) {
  return std::make_unique<CpuDevice>(comm, options);
}

}  // namespace zplan::executor
