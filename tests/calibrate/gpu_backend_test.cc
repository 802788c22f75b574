// The cuda and nccl backends where no GPU is needed: their "no device" errors (for real on a
// machine without a GPU), the pure helpers, and the check macros every library call goes
// through (exercised here with stand-in library types, so that no CUDA, NCCL or MPI header is
// needed).
#include <cstring>
#include <string>

#include <catch2/catch.hpp>

#include "calibrate/calibrate.h"
#include "calibrate/gpu_info.h"
#include "calibrate/registry.h"
#include "kernels/check.h"
#include "kernels/config.h"
#include "base/input_error.h"

namespace zplan::calibrate {
namespace {

// Stand-ins with the libraries' names, as the macros see them.
enum cudaError_t { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 };
const char* cudaGetErrorString(cudaError_t) { return "out of memory"; }
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1 };
const char* cublasGetStatusString(cublasStatus_t) { return "the library was not initialized"; }
enum ncclResult_t { ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclInProgress = 7 };
const char* ncclGetErrorString(ncclResult_t) { return "unhandled cuda error"; }
const char* ncclGetLastError(void*) { return "Cuda failure 'out of memory'"; }
constexpr int MPI_SUCCESS = 0;
constexpr int MPI_MAX_ERROR_STRING = 64;
int MPI_Error_string(int, char* text, int* len) {
  std::strcpy(text, "MPI_ERR_TRUNCATE: message truncated");
  *len = static_cast<int>(std::strlen(text));
  return 0;
}

cudaError_t fails() { return cudaErrorMemoryAllocation; }

TEST_CASE("check macros throw one line with file, line, call and the library's message",
          "[calibrate][gpu]") {
  CHECK_NOTHROW([] { ZPLAN_CUDA_CHECK(cudaSuccess); }());
  try {
    ZPLAN_CUDA_CHECK(fails());
    FAIL("no throw");
  } catch (const kernels::BackendError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Matches("tests/calibrate/gpu_backend_test\\.cc:[0-9]+: CUDA call "
                                    "fails\\(\\) failed: out of memory"));
    CHECK(what.find('\n') == std::string::npos);
  }
  CHECK_THROWS_WITH([] { ZPLAN_CUBLAS_CHECK(CUBLAS_STATUS_NOT_INITIALIZED); }(),
                    Catch::EndsWith("cuBLAS call CUBLAS_STATUS_NOT_INITIALIZED failed: the "
                                    "library was not initialized"));
  CHECK_NOTHROW([] { ZPLAN_NCCL_CHECK(ncclInProgress); }());  // non-blocking communicators
  CHECK_THROWS_WITH([] { ZPLAN_NCCL_CHECK(ncclUnhandledCudaError); }(),
                    Catch::EndsWith("NCCL call ncclUnhandledCudaError failed: unhandled cuda "
                                    "error (Cuda failure 'out of memory')"));
  CHECK_THROWS_WITH([] { ZPLAN_MPI_CHECK(15); }(),
                    Catch::EndsWith("MPI call 15 failed: MPI_ERR_TRUNCATE: message truncated"));
  // A failed call is bad input of the machine, not a bug: cli/main.cc prints it, exit code 1.
  CHECK_THROWS_AS([] { ZPLAN_MPI_CHECK(15); }(), InputError);
}

TEST_CASE("architectures and stock profiles from what CUDA reports", "[calibrate][gpu]") {
  CHECK(!arch_for_compute_capability(6, 0).has_value());
  CHECK(arch_for_compute_capability(7, 0) == hardware::Arch::kVolta);
  CHECK(arch_for_compute_capability(8, 0) == hardware::Arch::kAmpere);
  CHECK(arch_for_compute_capability(8, 9) == hardware::Arch::kAmpere);
  CHECK(arch_for_compute_capability(9, 0) == hardware::Arch::kHopper);
  CHECK(arch_for_compute_capability(10, 0) == hardware::Arch::kBlackwell);
  const double gib = 1024.0 * 1024 * 1024;
  CHECK(stock_profile_for_device("NVIDIA A100-SXM4-80GB", 80 * gib) == "a100");
  CHECK(stock_profile_for_device("NVIDIA A100-SXM4-40GB", 40 * gib) == "a100-40g");
  CHECK(stock_profile_for_device("NVIDIA H100 80GB HBM3", 80 * gib) == "h100");
  CHECK(stock_profile_for_device("NVIDIA H100 PCIe", 80 * gib) == "h100-pcie");
  CHECK(stock_profile_for_device("NVIDIA A100 80GB PCIe", 80 * gib) == "a100-pcie");
  CHECK(stock_profile_for_device("NVIDIA A100-PCIE-40GB", 40 * gib) == "a100-40g");
  CHECK(stock_profile_for_device("NVIDIA L4", 22.5 * gib) == "l4");
  CHECK(stock_profile_for_device("NVIDIA A10G", 22.5 * gib) == "a10g");
  CHECK(stock_profile_for_device("NVIDIA L40S", 45 * gib) == "l40s");
  CHECK(stock_profile_for_device("NVIDIA GeForce RTX 4090", 24 * gib) == "rtx4090");
  CHECK(stock_profile_for_device("NVIDIA L40", 45 * gib).empty());
  CHECK(stock_profile_for_device("NVIDIA H200", 141 * gib) == "h200");
  CHECK(stock_profile_for_device("Tesla V100-SXM2-32GB", 32 * gib) == "v100");
  for (Sweep s : {Sweep::kTiny, Sweep::kQuick, Sweep::kFull}) {
    CHECK(!gpu_gemm_shapes(s).empty());
    CHECK(gpu_copy_bytes(s) > 0);
  }
}

// The message a GPU backend gives on a machine without a GPU; "" if this machine has one.
std::string no_device_message(const std::string& backend) {
  auto group = kernels::make_single_process_comm();
  try {
    make_backend(backend)->check(*group, ProbeOptions{});
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("without a GPU, cuda says so in one line", "[calibrate][gpu]") {
#if ZPLAN_HAVE_CUDA
  std::string what = no_device_message("cuda");
  if (what.empty()) {
    WARN("this machine has a CUDA device: the no-device path is not exercised");
    return;
  }
  CHECK_THAT(what, Catch::StartsWith("backend 'cuda': no CUDA device (cudaGetDeviceCount: "));
  CHECK_THAT(what, Catch::EndsWith(")"));
  CHECK(what.find('\n') == std::string::npos);
  // The whole calibration stops there, before measuring anything.
  CalibrateOptions o;
  o.backends = "host,cuda";
  o.probe.sweep = Sweep::kTiny;
  auto group = kernels::make_single_process_comm();
  Progress quiet(nullptr);
  CHECK_THROWS_WITH(calibrate(o, *group, quiet), what);
#else
  WARN("built without the cuda backend");
#endif
}

TEST_CASE("without a GPU, nccl says so in one line", "[calibrate][gpu]") {
#if ZPLAN_HAVE_NCCL
  std::string what = no_device_message("nccl");
  if (what.empty()) {
    WARN("this machine has a CUDA device: the no-device path is not exercised");
    return;
  }
  CHECK_THAT(what, Catch::StartsWith("backend 'nccl': no CUDA device (cudaGetDeviceCount: "));
  CHECK(what.find('\n') == std::string::npos);
#else
  WARN("built without the nccl backend");
#endif
}

}  // namespace
}  // namespace zplan::calibrate
