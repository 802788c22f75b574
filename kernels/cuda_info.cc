// kernels/cuda_info.h on cudart (built with ZPLAN_HAVE_CUDA).
#include "kernels/cuda_info.h"

#include <cuda_runtime.h>

#include "kernels/check.h"

namespace zplan::kernels {

int visible_cuda_devices(const std::string& backend) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    throw_unavailable(backend, std::string("no CUDA device (cudaGetDeviceCount: ") +
                                   cudaGetErrorString(err) + ")");
  }
  if (count == 0) throw_unavailable(backend, "no CUDA device (cudaGetDeviceCount: 0 devices)");
  return count;
}

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

}  // namespace zplan::kernels
