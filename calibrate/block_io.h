// Sequential file I/O the way DeepSpeed's aio swapper does it, for the NVMe probe.
//
// ZeRO-Infinity swaps optimizer states and parameters with DeepSpeed's aio handle configured by
// the `aio` block: block_size 1 MiB, queue_depth 8, one thread, O_DIRECT
// (reference/deepspeed_internals.md §1.2). The probe does the same: blocks of block_bytes from
// buffers aligned to 4096 bytes (O_DIRECT's requirement, reference/nccl_hardware.md §7.4), moved
// by kernels/block_transfer.h -- queue_depth of them in flight through io_uring, or one at a time
// with pread/pwrite where io_uring is unavailable -- the engine the executor's swap file uses.
// Units: bytes and seconds.
#ifndef ZPLAN_CALIBRATE_BLOCK_IO_H_
#define ZPLAN_CALIBRATE_BLOCK_IO_H_

#include <cstddef>
#include <string>

#include "kernels/block_transfer.h"

namespace zplan::calibrate {

// A scratch file in `dir`: created with a hidden unique name, opened with O_DIRECT when the file
// system allows it (tmpfs does not), and unlinked at once, so that nothing is left behind however
// the process ends (calibrate/interrupt.h covers the instant between creating and unlinking).
class ScratchFile {
 public:
  // Throws InputError naming `dir` when no file can be created there.
  explicit ScratchFile(const std::string& dir);
  ~ScratchFile();
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  int fd() const { return fd_; }
  bool o_direct() const { return o_direct_; }
  const std::string& dir() const { return dir_; }
  // Why the file is not O_DIRECT ("" when it is).
  const std::string& note() const { return note_; }

 private:
  std::string dir_;
  std::string note_;
  int fd_ = -1;
  bool o_direct_ = false;
};

// Writes `bytes` (rounded up to whole blocks) from offset 0 and waits for the data to reach the
// device (fdatasync); returns the seconds this took. *engine = "io_uring" or "pread/pwrite
// (<why io_uring was not used>)". Throws InputError naming the directory on an I/O error (e.g.
// no space left).
double sequential_write(const ScratchFile& file, size_t bytes,
                        const kernels::BlockIoSettings& settings, std::string* engine);
// Reads the first `bytes` back (after sequential_write); without O_DIRECT the file's pages are
// dropped from the page cache first, so that the read goes to the device.
double sequential_read(const ScratchFile& file, size_t bytes,
                       const kernels::BlockIoSettings& settings, std::string* engine);

}  // namespace zplan::calibrate

#endif  // ZPLAN_CALIBRATE_BLOCK_IO_H_
