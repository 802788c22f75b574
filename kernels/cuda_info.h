// Helpers shared by the cuda and nccl backends (built with ZPLAN_HAVE_CUDA).
#ifndef ZPLAN_KERNELS_CUDA_INFO_H_
#define ZPLAN_KERNELS_CUDA_INFO_H_

#include <string>

namespace zplan::kernels {

// The number of CUDA devices this process sees. Throws InputError
// "backend '<backend>': no CUDA device (cudaGetDeviceCount: <CUDA's message>)" when there is
// none (no GPU, no driver, CUDA_VISIBLE_DEVICES empty).
int visible_cuda_devices(const std::string& backend);

// "13.0" for CUDA's integer versions (1000 * major + 10 * minor).
std::string cuda_version_text(int version);

}  // namespace zplan::kernels

#endif  // ZPLAN_KERNELS_CUDA_INFO_H_
