// ExecutorDevice: the one rank's device the reference executor runs a step graph on -- its memory,
// the kernels of a training step, its collectives and its copies. fp32 throughout, row-major.
//
// The executor's resources (sim::Resource: compute stream, all-gather and reduce streams, copy
// engines, CPU optimizer, NVMe queues) are worker threads; each calls the device from its own
// thread, and a call returns when its work is done (a GPU device synchronizes its stream before
// returning, so per-task host timestamps are the task's time).
//
// Implementations: the CPU device (executor/device_cpu.cc): device memory is host memory in its
// own arena, GEMMs go to kernels/cpu_gemm.h (BLAS: OpenBLAS, one thread per rank, as calibration
// times them), collectives to a kernels::Comm (MPI ranks, or threads in tests), host<->device
// copies are memcpy. The CUDA device
// (executor/device_cuda.cc, when the build has the CUDA toolkit and nvcc): cuBLAS,
// zplan's kernels, cudaMemcpyAsync and NCCL, on one stream per calling thread (docs/validation.md
// says what has been run on a GPU).
//
// Contention on a CPU device. A CPU rank has its cores and nothing else: work on another resource
// (a collective's copies and reductions, a bucket copy, a host<->device memcpy) takes the cores
// that the compute stream runs on. The CPU device makes that explicit: while any such side work
// runs (begin_side_work .. end_side_work), compute kernels stop at their next chunk boundary and
// wait -- the simulator's comm_compute_slowdown = 1 ("compute makes no progress while a collective
// runs on another stream"). Side work itself is not held back. A GPU device overlaps for real and
// ignores these calls.
#ifndef ZPLAN_EXECUTOR_DEVICE_H_
#define ZPLAN_EXECUTOR_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "executor/memory.h"
#include "kernels/comm.h"
#include "kernels/cpu_adam.h"

namespace zplan::executor {

class ExecutorDevice {
 public:
  virtual ~ExecutorDevice() = default;

  virtual std::string name() const = 0;  // "cpu (OpenBLAS 0.3.21, 1 thread, avx512)"
  virtual RawMemory& raw_memory() = 0;
  virtual kernels::Comm& comm() = 0;

  // --- Compute kernels on device memory (the compute stream, or the optimizer on the device) ---
  // C[m x n] = alpha * op(A) * op(B) + beta * C with op(X) = X or X^T; lda, ldb, ldc are the row
  // strides of A, B, C as stored.
  virtual void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc) = 0;
  // y[r, :] = row for r < rows.
  virtual void fill_rows(float* y, const float* row, int64_t rows, int64_t cols) = 0;
  virtual void relu(float* y, size_t n) = 0;
  // dy *= (y > 0).
  virtual void relu_backward(float* dy, const float* y, size_t n) = 0;
  // out[c] (+)= sum over rows of x[r, c].
  virtual void column_sums(const float* x, int64_t rows, int64_t cols, float* out,
                           bool accumulate) = 0;
  // dy = scale * (y - target); returns sum((y - target)^2).
  virtual double mse_grad(float* dy, const float* y, const float* target, size_t n,
                          float scale) = 0;
  // sum((y - target)^2), nothing written.
  virtual double squared_error(const float* y, const float* target, size_t n) = 0;
  // y = a * x + b * y.
  virtual void axpby(float* y, const float* x, size_t n, float a, float b) = 0;
  // Stand-in for an elementwise kernel that reads and writes `bytes` bytes in total of `buf`
  // (which holds at least bytes / 2).
  virtual void memory_pass(float* buf, double bytes) = 0;
  // Adam on device memory (stages 0-3 without offload).
  virtual void adam(const kernels::AdamHyper& hyper, int64_t step, float* param, const float* grad,
                    float* exp_avg, float* exp_avg_sq, int64_t n) = 0;

  // --- Copies: between any two tiers (device arena, pinned or pageable host) ---
  virtual void copy(float* dst, const float* src, size_t n) = 0;
  // dst = scale * src.
  virtual void scale_copy(float* dst, const float* src, size_t n, float scale) = 0;
  // dst += scale * src.
  virtual void add_scaled(float* dst, const float* src, size_t n, float scale) = 0;
  virtual void zero(float* dst, size_t n) = 0;

  // --- Contention (see above) ---
  virtual void begin_side_work() = 0;
  virtual void end_side_work() = 0;
  // How long the compute stream waited for side work since the last call (seconds).
  virtual double take_compute_wait_s() = 0;
};

struct CpuDeviceOptions {
  int blas_threads = 1;  // BLAS / Adam threads of this rank
  // Side work holds back compute (comm_compute_slowdown = 1); false lets the OS share the cores.
  bool pause_compute_for_side_work = true;
  // Compute kernels check for side work every ~this many FLOPs (GEMMs are cut along a dimension
  // into chunks of at least this size) or bytes (elementwise kernels).
  double chunk_flops = 4e8;
  double chunk_bytes = 8e6;
};

// The CPU device of one rank, talking to the other ranks through `comm` (kept, not owned).
std::unique_ptr<ExecutorDevice> make_cpu_device(kernels::Comm* comm,
                                                const CpuDeviceOptions& options = {});

// True iff this build has the CUDA device.
bool executor_has_cuda();

// The CUDA device of this rank: GPU (local rank modulo the GPUs visible), with NCCL collectives
// among the ranks of `control` (kept, not owned; its control channel bootstraps NCCL and carries
// the control traffic). A collective without progress for timeout_s aborts the job. Throws
// InputError when this build has no CUDA device or no GPU is visible, BackendError when CUDA or
// NCCL fails.
std::unique_ptr<ExecutorDevice> make_cuda_device(kernels::Comm* control, double timeout_s);

}  // namespace zplan::executor

#endif  // ZPLAN_EXECUTOR_DEVICE_H_
