// Errors of the measurement backends: a library call that failed, and a backend that cannot run
// on this machine.
//
// Both are InputErrors, not bugs: the machine or its set-up is wrong (no GPU, no driver, an MPI
// launch that lost a rank), so cli/main.cc prints them as one line and exits with kExitBadInput.
// Every CUDA, cuBLAS, NCCL and MPI call in calibrate/ goes through one of the check macros below,
// which name the file, the line, the call and the library's own message, in the manner of
// nccl-tests' CUDACHECK / NCCLCHECK (reference/style_anchors.md §3), but throwing instead of
// returning codes (§10.5). The macros only name library types when they are expanded, so this
// header needs none of the libraries' headers.
#ifndef ZPLAN_KERNELS_CHECK_H_
#define ZPLAN_KERNELS_CHECK_H_

#include <string>

#include "base/input_error.h"

namespace zplan::kernels {

// what() = "<file>:<line>: <library> call <call> failed: <message>".
class BackendError : public InputError {
 public:
  BackendError(const std::string& where, const std::string& problem) : InputError(where, problem) {}
};

// Throws BackendError for a failed call. `file` is shortened to its path inside the repository.
[[noreturn]] void throw_call_error(const char* library, const char* file, int line,
                                   const char* call, const std::string& message);

// Throws InputError "backend '<backend>': <missing>", e.g.
// "backend 'cuda': no CUDA device (cudaGetDeviceCount: no CUDA-capable device is detected)".
[[noreturn]] void throw_unavailable(const std::string& backend, const std::string& missing);

}  // namespace zplan::kernels

// CUDA runtime: cudaError_t, message from cudaGetErrorString.
#define ZPLAN_CUDA_CHECK(call)                                              \
  do {                                                                      \
    cudaError_t zplan_err_ = (call);                                        \
    if (zplan_err_ != cudaSuccess) {                                        \
      ::zplan::kernels::throw_call_error("CUDA", __FILE__, __LINE__, #call, \
                                         cudaGetErrorString(zplan_err_));   \
    }                                                                       \
  } while (0)

// cuBLAS: cublasStatus_t, message from cublasGetStatusString (cuBLAS 11.4.2+).
#define ZPLAN_CUBLAS_CHECK(call)                                                \
  do {                                                                          \
    cublasStatus_t zplan_status_ = (call);                                      \
    if (zplan_status_ != CUBLAS_STATUS_SUCCESS) {                               \
      ::zplan::kernels::throw_call_error("cuBLAS", __FILE__, __LINE__, #call,   \
                                         cublasGetStatusString(zplan_status_)); \
    }                                                                           \
  } while (0)

// NCCL: ncclResult_t, message from ncclGetErrorString plus ncclGetLastError's detail.
#define ZPLAN_NCCL_CHECK(call)                                                                 \
  do {                                                                                         \
    ncclResult_t zplan_result_ = (call);                                                       \
    if (zplan_result_ != ncclSuccess && zplan_result_ != ncclInProgress) {                     \
      const char* zplan_last_ = ncclGetLastError(nullptr);                                     \
      ::zplan::kernels::throw_call_error("NCCL", __FILE__, __LINE__, #call,                    \
                                         std::string(ncclGetErrorString(zplan_result_)) +      \
                                             (zplan_last_ != nullptr && zplan_last_[0] != '\0' \
                                                  ? std::string(" (") + zplan_last_ + ")"      \
                                                  : std::string()));                           \
    }                                                                                          \
  } while (0)

// MPI: an int error code, message from MPI_Error_string. MPI's default error handler aborts;
// the MPI group sets MPI_ERRORS_RETURN so that these checks see the codes.
#define ZPLAN_MPI_CHECK(call)                                                   \
  do {                                                                          \
    int zplan_rc_ = (call);                                                     \
    if (zplan_rc_ != MPI_SUCCESS) {                                             \
      char zplan_text_[MPI_MAX_ERROR_STRING] = {};                              \
      int zplan_len_ = 0;                                                       \
      MPI_Error_string(zplan_rc_, zplan_text_, &zplan_len_);                    \
      ::zplan::kernels::throw_call_error("MPI", __FILE__, __LINE__, #call,      \
                                         std::string(zplan_text_, zplan_len_)); \
    }                                                                           \
  } while (0)

#endif  // ZPLAN_KERNELS_CHECK_H_
