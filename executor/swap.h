// SwapFile: the reference executor's NVMe: one file per rank in the swap directory (the config's
// nvme_path when it exists, else a temporary directory), opened with O_DIRECT where the file
// system allows it (tmpfs does not: then plain buffered I/O followed by fdatasync, and the
// report says so), and unlinked at once so that nothing is left behind, even after a crash.
//
// Regions are reserved up front and stay for the run; their bytes count as the NVMe tier of the
// tracking allocator. Reads and writes move whole regions or aligned parts of them: offsets and
// sizes are multiples of kSwapAlign bytes and buffers are 4096-aligned (the tracking allocator's
// blocks are), which O_DIRECT requires.
#ifndef ZPLAN_EXECUTOR_SWAP_H_
#define ZPLAN_EXECUTOR_SWAP_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "executor/memory.h"
#include "kernels/block_transfer.h"

namespace zplan::executor {

inline constexpr size_t kSwapAlign = 4096;

class SwapFile {
 public:
  // Creates the file in `dir`. Transfers are cut into blocks of block_bytes with queue_depth of
  // them in flight (kernels/block_transfer.h: io_uring where the build has liburing and the
  // kernel allows it, else one at a time), as DeepSpeed's aio handle moves them (the ds_config's
  // "aio" block). Throws InputError naming the directory if it cannot.
  SwapFile(const std::string& dir, int rank, MemoryTracker* tracker, size_t block_bytes,
           int queue_depth);
  ~SwapFile();
  SwapFile(const SwapFile&) = delete;
  SwapFile& operator=(const SwapFile&) = delete;

  // Reserves `bytes` (rounded up to kSwapAlign) counted as NVMe `category`; returns its offset.
  uint64_t reserve(size_t bytes, sim::Category category);

  // Writes / reads `bytes` at `offset`; both multiples of kSwapAlign, `buf` 4096-aligned.
  // Throws InputError on an I/O error or a transfer that makes no progress.
  void write(uint64_t offset, const void* buf, size_t bytes);
  void read(uint64_t offset, void* buf, size_t bytes);

  bool direct() const { return direct_; }
  const std::string& engine() const { return engine_; }
  const std::string& path() const { return path_; }
  std::string description() const;  // "O_DIRECT file in /local_nvme"

 private:
  MemoryTracker* tracker_;
  std::string dir_;
  std::string path_;
  void transfer(bool write, uint64_t offset, char* buf, size_t bytes);

  int fd_ = -1;
  bool direct_ = false;
  uint64_t end_ = 0;
  size_t block_bytes_;
  int queue_depth_;
  std::string engine_;
  std::unique_ptr<kernels::BlockTransfer> io_;
};

// Rounds bytes up to kSwapAlign.
inline size_t swap_aligned(size_t bytes) { return (bytes + kSwapAlign - 1) / kSwapAlign * kSwapAlign; }

}  // namespace zplan::executor

#endif  // ZPLAN_EXECUTOR_SWAP_H_
