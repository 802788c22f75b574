// BlockTransfer's pread/pwrite engine (every build), and the io_uring one's entry point.
#include "kernels/block_transfer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <unistd.h>

#include "base/input_error.h"

namespace zplan::kernels {

namespace internal {

[[noreturn]] void throw_transfer_error(bool write, const std::string& where,
                                       const std::string& what, const std::string& why) {
  throw InputError(where, what + (write ? "write" : "read") + " failed: " + why);
}

// The rest of block `b` from byte `done` on, one call at a time; EINTR is retried.
void finish_block(int fd, bool write, const IoBlock& b, size_t done, const std::string& where,
                  const std::string& what) {
  while (done < b.len) {
    const off_t at = static_cast<off_t>(b.offset + done);
    ssize_t n = write ? pwrite(fd, b.buf + done, b.len - done, at)
                      : pread(fd, b.buf + done, b.len - done, at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_transfer_error(write, where, what, std::strerror(errno));
    if (n == 0) {
      throw_transfer_error(
          write, where, what,
          "no progress at byte " + std::to_string(at) + " (end of the file, or the disk is full)");
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace internal

void BlockTransfer::run(int fd, bool write, size_t count, const BlockSource& block,
                        const std::string& where, const std::string& what) const {
  if (ring_ != nullptr) return run_uring(fd, write, count, block, where, what);
  for (size_t i = 0; i < count; ++i) {
    const IoBlock b = block(i, static_cast<int>(i % static_cast<size_t>(queue_depth_)));
    internal::finish_block(fd, write, b, 0, where, what);
  }
}

}  // namespace zplan::kernels
