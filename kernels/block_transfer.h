// The io_uring engine of block_io.cc, in its own file so that the build picks
// block_io_uring.cc (ZPLAN_HAVE_URING) or block_io_no_uring.cc.
#ifndef ZPLAN_KERNELS_BLOCK_TRANSFER_H_
#define ZPLAN_KERNELS_BLOCK_TRANSFER_H_

#include <cstddef>
#include <string>

#include "calibrate/block_io.h"

namespace zplan::kernels::internal {

enum class IoStatus { kDone, kUnavailable };

// Transfers `blocks` blocks sequentially from offset 0 with settings.queue_depth in flight, block
// i using buffers[i % queue_depth]. Returns kUnavailable (and why in *why) when io_uring cannot be
// used here; throws InputError naming `dir` on an I/O error.
IoStatus uring_transfer(int fd, bool write, size_t blocks, const BlockIoSettings& settings,
                        char* const* buffers, const std::string& dir, std::string* why);

}  // namespace zplan::kernels::internal

#endif  // ZPLAN_KERNELS_BLOCK_TRANSFER_H_
