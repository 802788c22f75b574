// The cuda backend (built with ZPLAN_HAVE_CUDA): one GPU per rank, all ranks of a node at once.
// * cuBLAS GEMMs (cublasGemmEx, bf16 and fp16 inputs, fp32 accumulation CUBLAS_COMPUTE_32F) over
//   transformer-layer shapes: efficiency vs size (reference/nccl_hardware.md §7.3);
// * host<->device copies as CUDA's bandwidthTest measures them (§7.2): pinned = cudaHostAlloc'ed
//   memory, back-to-back cudaMemcpyAsync between one pair of events; pageable = malloc'ed memory,
//   synchronous cudaMemcpy timed on the host;
// * device-to-device copies (HBM), counted as bandwidthTest counts them: 2 x size (read + write).
// Events time everything on the GPU (§7.1); each measurement is a median over repeats, then a mean
// over ranks. Plain C++ against cudart and cuBLAS: no kernels of zplan's own, no .cu files.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "calibrate/backend.h"
#include "calibrate/gpu_info.h"
#include "kernels/check.h"
#include "kernels/cuda_info.h"

namespace zplan::calibrate {

namespace {

constexpr int kWarmup = 5;  // reference §7.1: at least 5 warm-up iterations per size
constexpr double kTargetBlockS = 0.02;
constexpr int kMaxCalls = 1000;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int repeats_for(Sweep sweep) { return sweep == Sweep::kTiny ? 1 : (sweep == Sweep::kFull ? 5 : 3); }

// Event pair on one stream: seconds of the work enqueued between start() and stop().
class EventTimer {
 public:
  explicit EventTimer(cudaStream_t stream) : stream_(stream) {
    ZPLAN_CUDA_CHECK(cudaEventCreate(&start_));
    ZPLAN_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  void start() { ZPLAN_CUDA_CHECK(cudaEventRecord(start_, stream_)); }
  double stop() {
    ZPLAN_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    ZPLAN_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    ZPLAN_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms * 1e-3;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

class CudaBackend : public Backend {
 public:
  std::string name() const override { return "cuda"; }

  void check(kernels::Comm& group, const ProbeOptions&) override {
    int count = kernels::visible_cuda_devices("cuda");
    if (group.local_size() > count) {
      kernels::throw_unavailable(
          "cuda", std::to_string(group.local_size()) + " ranks on " + group.hosts().front() +
                      " but only " + std::to_string(count) + " CUDA devices (one rank per GPU)");
    }
  }

  void measure(kernels::Comm& g, const ProbeOptions& o, Progress& progress,
               Measurements* out) override;

 private:
  // Times `enqueue` (which enqueues `calls` operations on `stream`) on every rank at once;
  // returns the mean over ranks of the median seconds per operation.
  double time_on_gpu(kernels::Comm& g, cudaStream_t stream, int repeats, int calls,
                     const std::function<void()>& enqueue_one) {
    EventTimer timer(stream);
    std::vector<double> t;
    for (int r = 0; r < repeats; ++r) {
      ZPLAN_CUDA_CHECK(cudaStreamSynchronize(stream));
      g.barrier();
      timer.start();
      for (int i = 0; i < calls; ++i) enqueue_one();
      t.push_back(timer.stop() / calls);
    }
    return g.sum(median(t)) / g.size();
  }

  int calls_for(kernels::Comm& g, cudaStream_t stream, const std::function<void()>& enqueue_one) {
    EventTimer timer(stream);
    for (int i = 0; i < kWarmup - 1; ++i) enqueue_one();
    timer.start();
    enqueue_one();
    double one = g.max(timer.stop());
    return std::clamp(static_cast<int>(std::ceil(kTargetBlockS / std::max(one, 1e-7))), 1,
                      kMaxCalls);
  }
};

void CudaBackend::measure(kernels::Comm& g, const ProbeOptions& o, Progress& progress,
                          Measurements* out) {
  const int count = kernels::visible_cuda_devices("cuda");
  const int device = g.local_rank() % count;
  ZPLAN_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop;
  ZPLAN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  DeviceMeasurements& d = out->device;
  d.measured = true;
  d.name = prop.name;
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  d.devices_per_node = count;
  d.memory_bytes = double(prop.totalGlobalMem);
  int runtime = 0, driver = 0;
  ZPLAN_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  ZPLAN_CUDA_CHECK(cudaDriverGetVersion(&driver));
  out->versions["cuda_runtime"] = kernels::cuda_version_text(runtime);
  out->versions["cuda_driver"] = kernels::cuda_version_text(driver);

  cudaStream_t stream;
  ZPLAN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int repeats = repeats_for(o.sweep);
  const size_t bytes = static_cast<size_t>(gpu_copy_bytes(o.sweep));

  // Copies.
  {
    void* dev = nullptr;
    void* dev2 = nullptr;
    void* pinned = nullptr;
    ZPLAN_CUDA_CHECK(cudaMalloc(&dev, bytes));
    ZPLAN_CUDA_CHECK(cudaMalloc(&dev2, bytes));
    ZPLAN_CUDA_CHECK(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault));
    std::vector<char> pageable(bytes, 1);
    std::memset(pinned, 1, bytes);
    auto pinned_rate = [&](cudaMemcpyKind kind, void* dst, const void* src) {
      auto one = [&] { ZPLAN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream)); };
      int calls = calls_for(g, stream, one);
      return double(bytes) / time_on_gpu(g, stream, repeats, calls, one);
    };
    d.h2d_pinned_bytes_per_s = pinned_rate(cudaMemcpyHostToDevice, dev, pinned);
    d.d2h_pinned_bytes_per_s = pinned_rate(cudaMemcpyDeviceToHost, pinned, dev);
    // bandwidthTest counts a device-to-device copy twice: it reads and writes `bytes`.
    d.d2d_bytes_per_s = 2 * pinned_rate(cudaMemcpyDeviceToDevice, dev2, dev);
    auto pageable_rate = [&](cudaMemcpyKind kind, void* dst, const void* src) {
      ZPLAN_CUDA_CHECK(cudaMemcpy(dst, src, bytes, kind));  // warm-up
      std::vector<double> t;
      for (int r = 0; r < repeats; ++r) {
        g.barrier();
        auto t0 = std::chrono::steady_clock::now();
        ZPLAN_CUDA_CHECK(cudaMemcpy(dst, src, bytes, kind));
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      return double(bytes) / (g.sum(median(t)) / g.size());
    };
    d.h2d_pageable_bytes_per_s = pageable_rate(cudaMemcpyHostToDevice, dev, pageable.data());
    d.d2h_pageable_bytes_per_s = pageable_rate(cudaMemcpyDeviceToHost, pageable.data(), dev);
    cudaFreeHost(pinned);
    cudaFree(dev2);
    cudaFree(dev);
    for (auto [probe, rate] : {std::pair{"h2d pinned", d.h2d_pinned_bytes_per_s},
                               std::pair{"d2h pinned", d.d2h_pinned_bytes_per_s},
                               std::pair{"h2d pageable", d.h2d_pageable_bytes_per_s},
                               std::pair{"d2h pageable", d.d2h_pageable_bytes_per_s},
                               std::pair{"d2d", d.d2d_bytes_per_s}}) {
      RateRow r;
      r.probe = std::string("cuda ") + probe;
      r.size = double(bytes);
      r.rate = rate;
      r.time_s = double(bytes) / rate;
      r.node_rate = rate * g.size() / g.nodes();
      d.rates.push_back(r);
    }
    progress.note("cuda: copies done on " + d.name);
  }

  // GEMMs.
  cublasHandle_t handle;
  ZPLAN_CUBLAS_CHECK(cublasCreate(&handle));
  ZPLAN_CUBLAS_CHECK(cublasSetStream(handle, stream));
  int cublas_version = 0;
  ZPLAN_CUBLAS_CHECK(cublasGetVersion(handle, &cublas_version));
  out->versions["cublas"] = std::to_string(cublas_version);
  const std::vector<GemmShape> shapes = gpu_gemm_shapes(o.sweep);
  size_t max_elems = 0;
  for (const GemmShape& s : shapes) {
    max_elems = std::max({max_elems, size_t(s.m * s.k), size_t(s.k * s.n), size_t(s.m * s.n)});
  }
  void *a = nullptr, *b = nullptr, *c = nullptr;
  ZPLAN_CUDA_CHECK(cudaMalloc(&a, max_elems * 2));
  ZPLAN_CUDA_CHECK(cudaMalloc(&b, max_elems * 2));
  ZPLAN_CUDA_CHECK(cudaMalloc(&c, max_elems * 2));
  ZPLAN_CUDA_CHECK(cudaMemset(a, 0, max_elems * 2));
  ZPLAN_CUDA_CHECK(cudaMemset(b, 0, max_elems * 2));
  const float alpha = 1.0f, beta = 0.0f;
  for (auto [dtype, type] : {std::pair{"bf16", CUDA_R_16BF}, std::pair{"fp16", CUDA_R_16F}}) {
    for (const GemmShape& s : shapes) {
      // Row-major C = A B is column-major C^T = B^T A^T: swap the operands.
      auto one = [&] {
        ZPLAN_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, int(s.n), int(s.m),
                                        int(s.k), &alpha, b, type, int(s.n), a, type, int(s.k),
                                        &beta, c, type, int(s.n), CUBLAS_COMPUTE_32F,
                                        CUBLAS_GEMM_DEFAULT));
      };
      int calls = calls_for(g, stream, one);
      d.gemms.push_back(GemmRow::of(dtype, s, time_on_gpu(g, stream, repeats, calls, one)));
    }
  }
  cudaFree(c);
  cudaFree(b);
  cudaFree(a);
  cublasDestroy(handle);
  cudaStreamDestroy(stream);
  progress.note("cuda: " + std::to_string(d.gemms.size()) + " GEMMs on " + d.name);
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace zplan::calibrate
