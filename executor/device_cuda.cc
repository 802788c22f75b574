// The CUDA device of the reference executor (built with ZPLAN_HAVE_CUDA_EXECUTOR): cuBLAS GEMMs,
// the elementwise kernels of executor/cuda_kernels.cu, cudaMemcpyAsync copies, NCCL
// collectives (kernels/comm_nccl.cc; one rank needs none).
//
// Streams: every thread that calls the device (the executor's resource workers, and the thread
// that sets the rank up) gets its own non-blocking stream and cuBLAS handle, so that the compute
// stream, the gather and reduce streams and the copy engines overlap as CUDA streams do. Each call
// synchronizes its stream before it returns (device.h), so a task's host timestamps are
// its time on the GPU.
//
// Memory: the device tier is CUDA managed memory preferring this GPU and prefetched to it, so
// that the rank's set-up code may write it from the host (initial weights); during a step only
// kernels, copies and collectives touch it. Pinned host memory is cudaHostAlloc'ed (mapped, so
// kernels can read it); pageable host memory is plain aligned memory. Elementwise operations
// whose operands are all host memory run on the host, as DeepSpeed runs them on the CPU.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "executor/cuda_kernels.h"
#include "executor/device.h"
#include "executor/executor.h"
#include "kernels/check.h"
#include "kernels/comm_nccl.h"
#include "kernels/config.h"
#include "kernels/cuda_info.h"

namespace zplan::executor {

namespace {

#if CUDART_VERSION >= 13000
cudaMemLocation device_location(int gpu) {
  cudaMemLocation loc{};
  loc.type = cudaMemLocationTypeDevice;
  loc.id = gpu;
  return loc;
}
#endif

class CudaRawMemory : public RawMemory {
 public:
  explicit CudaRawMemory(int gpu) : gpu_(gpu) {}

  void* allocate(sim::Tier tier, size_t bytes) override {
    ZPLAN_CUDA_CHECK(cudaSetDevice(gpu_));
    const size_t size = std::max<size_t>(bytes, 1);
    void* p = nullptr;
    switch (tier) {
      case sim::Tier::kGpu: {
        if (cudaMallocManaged(&p, size) != cudaSuccess) throw std::bad_alloc();
        // On a stream of its own, without a device-wide synchronize: a collective of another
        // stream may be waiting for a peer that waits for this rank.
        cudaStream_t s = init_stream();
        // Hints only: a GPU without concurrent managed access refuses them, and still works.
#if CUDART_VERSION >= 13000
        cudaMemAdvise(p, size, cudaMemAdviseSetPreferredLocation, device_location(gpu_));
        cudaMemPrefetchAsync(p, size, device_location(gpu_), 0, s);
#else
        cudaMemAdvise(p, size, cudaMemAdviseSetPreferredLocation, gpu_);
        cudaMemPrefetchAsync(p, size, gpu_, s);
#endif
        cudaGetLastError();
        ZPLAN_CUDA_CHECK(cudaMemsetAsync(p, 0, size, s));
        ZPLAN_CUDA_CHECK(cudaStreamSynchronize(s));
        return p;
      }
      case sim::Tier::kPinnedHost:
        if (cudaHostAlloc(&p, size, cudaHostAllocPortable | cudaHostAllocMapped) != cudaSuccess) {
          throw std::bad_alloc();
        }
        std::memset(p, 0, size);
        return p;
      default: {
        const size_t rounded = (size + 4095) / 4096 * 4096;
        p = std::aligned_alloc(4096, rounded);
        if (p == nullptr) throw std::bad_alloc();
        std::memset(p, 0, rounded);
        return p;
      }
    }
  }

  void release(sim::Tier tier, void* ptr, size_t bytes) override {
    if (ptr == nullptr) return;
    switch (tier) {
      case sim::Tier::kGpu:
        cudaFree(ptr);
        break;
      case sim::Tier::kPinnedHost:
        cudaFreeHost(ptr);
        break;
      default:
        std::free(ptr);
    }
  }

  std::string pinned_note() const override { return "cudaHostAlloc"; }

 private:
  cudaStream_t init_stream() {
    std::lock_guard<std::mutex> lock(mu_);
    if (stream_ == nullptr) {
      ZPLAN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    }
    return stream_;
  }

  int gpu_;
  std::mutex mu_;
  cudaStream_t stream_ = nullptr;  // allocations' initialization; never destroyed (process-long)
};

// Collectives of one rank alone: nothing to reduce, copies on the device.
class LocalCudaComm : public kernels::ControlledComm {
 public:
  explicit LocalCudaComm(kernels::Comm* control) : ControlledComm(control) {}
  std::string name() const override { return "one rank (no collectives)"; }
  void all_reduce(int, float*, size_t) override {}
  void all_gather(int, const float* send, size_t count, float* recv) override {
    if (send != recv)
      ZPLAN_CUDA_CHECK(cudaMemcpy(recv, send, count * sizeof(float), cudaMemcpyDefault));
  }
  void reduce_scatter(int, float*, size_t) override {}
  // One rank: every group is this rank alone.
  std::unique_ptr<kernels::Comm> split(int) override {
    return std::make_unique<LocalCudaComm>(control_);
  }
};

class CudaDevice : public ExecutorDevice {
 public:
  CudaDevice(kernels::Comm* control, int gpu, double timeout_s) : gpu_(gpu), memory_(gpu) {
    ZPLAN_CUDA_CHECK(cudaSetDevice(gpu_));
    cudaDeviceProp prop{};
    ZPLAN_CUDA_CHECK(cudaGetDeviceProperties(&prop, gpu_));
    gpu_name_ = prop.name;
    if (control->size() == 1) {
      comm_ = std::make_unique<LocalCudaComm>(control);
    } else {
      comm_ = kernels::make_nccl_comm(control, gpu_, kControlChannel, timeout_s);
    }
  }

  ~CudaDevice() override {
    for (auto& [id, s] : threads_) {
      cublasDestroy(s.blas);
      cudaStreamDestroy(s.stream);
      cudaFree(s.sum);
    }
  }

  std::string name() const override {
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    return "cuda (" + gpu_name_ + ", GPU " + std::to_string(gpu_) + ", CUDA " +
           kernels::cuda_version_text(runtime) + ", fp32 cuBLAS)";
  }
  RawMemory& raw_memory() override { return memory_; }
  kernels::Comm& comm() override { return *comm_; }

  void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
            int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) override {
    if (m <= 0 || n <= 0) return;
    Stream& s = stream();
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
    ZPLAN_CUBLAS_CHECK(cublasSgemm(
        s.blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
        static_cast<int>(m), static_cast<int>(k), &alpha, b, static_cast<int>(ldb), a,
        static_cast<int>(lda), &beta, c, static_cast<int>(ldc)));
    sync(s);
  }

  void fill_rows(float* y, const float* row, int64_t rows, int64_t cols) override {
    if (on_host({y, row})) {
      for (int64_t r = 0; r < rows; ++r) std::memcpy(y + r * cols, row, size_t(cols) * 4);
      return;
    }
    Stream& s = stream();
    cuda::fill_rows(s.stream, y, row, rows, cols);
    sync(s);
  }

  void relu(float* y, size_t n) override {
    Stream& s = stream();
    cuda::relu(s.stream, y, n);
    sync(s);
  }

  void relu_backward(float* dy, const float* y, size_t n) override {
    Stream& s = stream();
    cuda::relu_backward(s.stream, dy, y, n);
    sync(s);
  }

  void column_sums(const float* x, int64_t rows, int64_t cols, float* out,
                   bool accumulate) override {
    Stream& s = stream();
    cuda::column_sums(s.stream, x, rows, cols, out, accumulate);
    sync(s);
  }

  double mse_grad(float* dy, const float* y, const float* target, size_t n, float scale) override {
    Stream& s = stream();
    ZPLAN_CUDA_CHECK(cudaMemsetAsync(s.sum, 0, sizeof(double), s.stream));
    cuda::squared_error(s.stream, dy, y, target, n, scale, s.sum);
    double sq = 0;
    ZPLAN_CUDA_CHECK(cudaMemcpyAsync(&sq, s.sum, sizeof sq, cudaMemcpyDeviceToHost, s.stream));
    sync(s);
    return sq;
  }

  double squared_error(const float* y, const float* target, size_t n) override {
    return mse_grad(nullptr, y, target, n, 0.0f);
  }

  void axpby(float* y, const float* x, size_t n, float a, float b) override {
    if (on_host({y, x})) {
      for (size_t i = 0; i < n; ++i) y[i] = a * x[i] + b * y[i];
      return;
    }
    Stream& s = stream();
    cuda::axpby(s.stream, y, x, n, a, b);
    sync(s);
  }

  void memory_pass(float* buf, double bytes) override {
    Stream& s = stream();
    cuda::memory_pass(s.stream, buf, static_cast<size_t>(bytes / 8), unit_);
    sync(s);
  }

  void adam(const kernels::AdamHyper& hyper, int64_t step, float* param, const float* grad,
            float* exp_avg, float* exp_avg_sq, int64_t n) override {
    if (on_host({param, grad, exp_avg, exp_avg_sq})) {
      kernels::adam_step(hyper, step, param, grad, exp_avg, exp_avg_sq, n);
      return;
    }
    Stream& s = stream();
    cuda::adam(s.stream, kernels::adam_coeffs(hyper, step), param, grad, exp_avg, exp_avg_sq, n);
    sync(s);
  }

  void copy(float* dst, const float* src, size_t n) override {
    if (dst == src || n == 0) return;
    Stream& s = stream();
    ZPLAN_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDefault, s.stream));
    sync(s);
  }

  void scale_copy(float* dst, const float* src, size_t n, float scale) override {
    if (scale == 1.0f) return copy(dst, src, n);
    elementwise(dst, src, n, scale, /*add=*/false);
  }

  void add_scaled(float* dst, const float* src, size_t n, float scale) override {
    elementwise(dst, src, n, scale, /*add=*/true);
  }

  void zero(float* dst, size_t n) override {
    if (n == 0) return;
    if (on_host({dst})) {
      std::memset(dst, 0, n * sizeof(float));
      return;
    }
    Stream& s = stream();
    ZPLAN_CUDA_CHECK(cudaMemsetAsync(dst, 0, n * sizeof(float), s.stream));
    sync(s);
  }

  // Streams overlap for real on a GPU: nothing to hold back.
  void begin_side_work() override {}
  void end_side_work() override {}
  double take_compute_wait_s() override { return 0; }

 private:
  struct Stream {
    cudaStream_t stream = nullptr;
    cublasHandle_t blas = nullptr;
    double* sum = nullptr;  // mse_grad's device accumulator
  };

  // The calling thread's stream (created on its first call).
  Stream& stream() {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, fresh] = threads_.try_emplace(std::this_thread::get_id());
    if (fresh) {
      ZPLAN_CUDA_CHECK(cudaSetDevice(gpu_));
      ZPLAN_CUDA_CHECK(cudaStreamCreateWithFlags(&it->second.stream, cudaStreamNonBlocking));
      ZPLAN_CUBLAS_CHECK(cublasCreate(&it->second.blas));
      ZPLAN_CUBLAS_CHECK(cublasSetStream(it->second.blas, it->second.stream));
      // Plain fp32 GEMMs: the executor trains in fp32 and compares weights across stages.
      ZPLAN_CUBLAS_CHECK(cublasSetMathMode(it->second.blas, CUBLAS_PEDANTIC_MATH));
      ZPLAN_CUDA_CHECK(cudaMalloc(&it->second.sum, sizeof(double)));
    }
    return it->second;
  }

  void sync(Stream& s) {
    ZPLAN_CUDA_CHECK(cudaGetLastError());
    ZPLAN_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  }

  // True when every pointer is host memory (plain or pinned): the operation runs on the host.
  // Device (or managed) memory with plain host memory in one operation cannot run anywhere: a
  // kernel cannot read pageable memory, so that is a bug of the caller, reported as such.
  static bool on_host(std::initializer_list<const void*> ptrs) {
    bool device = false, pageable = false;
    for (const void* p : ptrs) {
      if (p == nullptr) continue;
      cudaPointerAttributes attr{};
      if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
        cudaGetLastError();  // older runtimes fail for unregistered host memory
        pageable = true;
        continue;
      }
      if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) device = true;
      if (attr.type == cudaMemoryTypeUnregistered) pageable = true;
    }
    if (device && pageable) {
      throw kernels::BackendError("cuda executor device",
                                  "an operation mixes device memory with pageable host memory");
    }
    return !device;
  }

  void elementwise(float* dst, const float* src, size_t n, float scale, bool add) {
    if (on_host({dst, src})) {
      for (size_t i = 0; i < n; ++i) dst[i] = add ? dst[i] + scale * src[i] : scale * src[i];
      return;
    }
    Stream& s = stream();
    cuda::scale_copy(s.stream, dst, src, n, scale, add);
    sync(s);
  }

  int gpu_;
  std::string gpu_name_;
  CudaRawMemory memory_;
  std::unique_ptr<kernels::Comm> comm_;
  std::mutex mu_;
  std::map<std::thread::id, Stream> threads_;
  float unit_ = 1.0f;
};

}  // namespace

bool executor_has_cuda() { return true; }

std::unique_ptr<ExecutorDevice> make_cuda_device(kernels::Comm* control, double timeout_s) {
  const int visible = kernels::visible_cuda_devices("cuda");
  // One GPU per rank: the rank's place among the ranks of its node, as calibrate assigns them.
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const int local_rank = local != nullptr ? std::atoi(local) : control->rank();
  return std::make_unique<CudaDevice>(control, local_rank % visible, timeout_s);
}

}  // namespace zplan::executor
