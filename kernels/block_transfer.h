// Block file I/O the way DeepSpeed's aio handle moves data (the ds_config's "aio" block:
// block_size, queue_depth; reference/deepspeed_internals.md §1.2), shared by the NVMe probe
// (calibrate/block_io.h) and the executor's swap file (executor/swap.h).
//
// A transfer is a run of blocks. With io_uring (liburing, ZPLAN_HAVE_URING) queue_depth blocks
// are in flight and each is refilled as it completes; where io_uring is not built in, is refused
// by the kernel (a seccomp policy), or is not wanted, blocks move one at a time with
// pread/pwrite. Both engines finish what they start: a short transfer is resubmitted for the
// rest of its block, and a wait or a call interrupted by a signal (EINTR) is retried; only an
// I/O error or a transfer that makes no progress (end of file, disk full) fails. Units: bytes.
#ifndef ZPLAN_KERNELS_BLOCK_TRANSFER_H_
#define ZPLAN_KERNELS_BLOCK_TRANSFER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace zplan::kernels {

struct BlockIoSettings {
  size_t block_bytes = size_t{1} << 20;  // DeepSpeed aio block_size
  int queue_depth = 8;                   // DeepSpeed aio queue_depth
};

// One block: `len` bytes between `buf` and the file at `offset`.
struct IoBlock {
  char* buf = nullptr;
  uint64_t offset = 0;
  size_t len = 0;
};

// Where block `index` of a transfer goes. `slot` (in [0, queue_depth)) is used by no block in
// flight, so a caller with queue_depth buffers may hand out buffers[slot].
using BlockSource = std::function<IoBlock(size_t index, int slot)>;

class BlockTransfer {
 public:
  // An io_uring of queue_depth entries, unless use_uring is false, the build has no liburing or
  // io_uring_queue_init fails (then uring_error() is its errno); blocks then go by pread/pwrite.
  explicit BlockTransfer(int queue_depth, bool use_uring = true);
  ~BlockTransfer();
  BlockTransfer(const BlockTransfer&) = delete;
  BlockTransfer& operator=(const BlockTransfer&) = delete;

  // True iff this build has liburing.
  static bool uring_built_in();
  bool uring() const { return ring_ != nullptr; }
  // io_uring_queue_init's errno when it failed, else 0.
  int uring_error() const { return uring_error_; }
  int queue_depth() const { return queue_depth_; }

  // Moves blocks [0, count) between memory and `fd`, as `block` says. Not thread-safe: one
  // transfer at a time. Throws InputError(where, what + "write failed: " + reason) (or "read").
  void run(int fd, bool write, size_t count, const BlockSource& block, const std::string& where,
           const std::string& what) const;

 private:
  struct Ring;
  void run_uring(int fd, bool write, size_t count, const BlockSource& block,
                 const std::string& where, const std::string& what) const;

  int queue_depth_;
  int uring_error_ = 0;
  Ring* ring_ = nullptr;
};

}  // namespace zplan::kernels

#endif  // ZPLAN_KERNELS_BLOCK_TRANSFER_H_
