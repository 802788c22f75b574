// What calibration needs to know about a GPU that does not need the GPU: the architecture for a
// compute capability, the stock profile closest to a device, the cuBLAS GEMM shapes and copy
// sizes of a sweep. Kept apart from the CUDA code so that CPU-only builds and tests use it.
#ifndef ZPLAN_CALIBRATE_GPU_INFO_H_
#define ZPLAN_CALIBRATE_GPU_INFO_H_

#include <optional>
#include <string>
#include <vector>

#include "calibrate/backend.h"
#include "calibrate/measurements.h"
#include "hardware/profile.h"

namespace zplan::calibrate {

// sm_70/72 Volta, sm_75 (Turing) and sm_80/86/87/89 Ampere-class caps, sm_90 Hopper, sm_100
// and later Blackwell (NCCL indexes its tuning tables the same way, reference §1.2); nullopt
// before Volta.
std::optional<hardware::Arch> arch_for_compute_capability(int major, int minor);

// The stock profile for a device: "A100" with more than 40 GiB -> "a100", else "a100-40g";
// "H100" -> "h100", "H200" -> "h200", "V100" -> "v100"; "" when none matches.
std::string stock_profile_for_device(const std::string& device_name, double memory_bytes);

// cuBLAS GEMM shapes (transformer layers: tokens x hidden times hidden x {h, 3h, 4h}, and square
// sizes 256 ... 8192) and the host<->device copy size of a sweep.
std::vector<GemmShape> gpu_gemm_shapes(Sweep sweep);
double gpu_copy_bytes(Sweep sweep);

}  // namespace zplan::calibrate

#endif  // ZPLAN_CALIBRATE_GPU_INFO_H_
