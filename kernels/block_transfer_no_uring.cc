// BlockTransfer in builds without liburing: every transfer goes by pread/pwrite.
#include <cstdlib>

#include "kernels/block_transfer.h"

namespace zplan::kernels {

struct BlockTransfer::Ring {};

BlockTransfer::BlockTransfer(int queue_depth, bool)
    : queue_depth_(queue_depth < 1 ? 1 : queue_depth) {}

BlockTransfer::~BlockTransfer() = default;

bool BlockTransfer::uring_built_in() { return false; }

void BlockTransfer::run_uring(int, bool, size_t, const BlockSource&, const std::string&,
                              const std::string&) const {
  std::abort();  // not reached: ring_ is always null here
}

}  // namespace zplan::kernels
