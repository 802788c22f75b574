// Builds without the CUDA executor device (no CUDA toolkit, or no CUDA compiler for its kernels).
#include "executor/device.h"
#include "kernels/check.h"

namespace zplan::executor {

bool executor_has_cuda() { return false; }

std::unique_ptr<ExecutorDevice> make_cuda_device(kernels::Comm*, double) {
  kernels::throw_unavailable("cuda",
                             "this zplan was built without the CUDA executor device (configure "
                             "with the CUDA toolkit and nvcc on PATH)");
}

}  // namespace zplan::executor
