// Builds without liburing: the probe uses pread/pwrite.
#include "kernels/block_transfer.h"

namespace zplan::kernels::internal {

IoStatus uring_transfer(int, bool, size_t, const BlockIoSettings&, char* const*, const std::string&,
                        std::string* why) {
  *why = "io_uring not built in: configure with liburing-dev installed";
  return IoStatus::kUnavailable;
}

}  // namespace zplan::kernels::internal
