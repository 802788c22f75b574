#include "executor/swap.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <sched.h>

#include "base/input_error.h"

namespace zplan::executor {

SwapFile::SwapFile(const std::string& dir, int rank, MemoryTracker* tracker, size_t block_bytes,
                   int queue_depth)
    : tracker_(tracker),
      dir_(dir),
      block_bytes_(std::max<size_t>(kSwapAlign, block_bytes / kSwapAlign * kSwapAlign)),
      queue_depth_(std::max(1, queue_depth)) {
  std::string pattern = dir + "/zplan-swap-rank" + std::to_string(rank) + "-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  int fd = mkstemp(name.data());
  if (fd < 0) {
    throw InputError(dir, std::string("cannot create the NVMe swap file: ") + std::strerror(errno));
  }
  path_ = name.data();
  // Reopen with O_DIRECT where the file system supports it.
  int direct_fd = open(path_.c_str(), O_RDWR | O_DIRECT);
  if (direct_fd >= 0) {
    close(fd);
    fd = direct_fd;
    direct_ = true;
  }
  unlink(path_.c_str());  // gone when the process ends, however it ends
  fd_ = fd;
  // Under a real-time policy (validate run with chrt to keep other processes off its cores),
  // io_uring's kernel workers would run at normal priority behind everything else and a swap
  // could take a second; blocks are then moved from the swapping thread itself.
  const int policy = sched_getscheduler(0);
  const bool realtime = policy == SCHED_FIFO || policy == SCHED_RR;
  io_ = std::make_unique<kernels::BlockTransfer>(queue_depth_, /*use_uring=*/!realtime);
  if (io_->uring()) {
    engine_ = "io_uring";
  } else if (!kernels::BlockTransfer::uring_built_in()) {
    engine_ = "pread/pwrite";
  } else if (realtime) {
    engine_ = "pread/pwrite (real-time policy: io_uring's workers would not be)";
  } else {
    engine_ =
        std::string("pread/pwrite (io_uring refused: ") + std::strerror(io_->uring_error()) + ")";
  }
}

SwapFile::~SwapFile() {
  io_.reset();
  if (fd_ >= 0) close(fd_);
}

void SwapFile::transfer(bool write, uint64_t offset, char* buf, size_t bytes) {
  const size_t blocks = (bytes + block_bytes_ - 1) / block_bytes_;
  io_->run(
      fd_, write, blocks,
      [&](size_t i, int) {
        const size_t at = i * block_bytes_;
        return kernels::IoBlock{buf + at, offset + at, std::min(block_bytes_, bytes - at)};
      },
      dir_, "NVMe swap ");
}

uint64_t SwapFile::reserve(size_t bytes, sim::Category category) {
  uint64_t offset = end_;
  size_t size = swap_aligned(bytes);
  end_ += size;
  if (ftruncate(fd_, static_cast<off_t>(end_)) != 0) {
    throw InputError(dir_, std::string("cannot grow the NVMe swap file: ") + std::strerror(errno));
  }
  tracker_->add_external(sim::Tier::kNvme, category, static_cast<double>(bytes));
  return offset;
}

void SwapFile::write(uint64_t offset, const void* buf, size_t bytes) {
  transfer(true, offset, static_cast<char*>(const_cast<void*>(buf)), bytes);
  if (!direct_) fdatasync(fd_);
}

void SwapFile::read(uint64_t offset, void* buf, size_t bytes) {
  transfer(false, offset, static_cast<char*>(buf), bytes);
}

std::string SwapFile::description() const {
  return std::string(direct_ ? "O_DIRECT" : "buffered (no O_DIRECT here) + fdatasync") +
         " file in " + dir_ + ", " + engine_ + ", " + std::to_string(block_bytes_ >> 10) +
         " KiB blocks x " + std::to_string(queue_depth_);
}

}  // namespace zplan::executor
