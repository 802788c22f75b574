#include "executor/swap.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "kernels/config.h"
#include "models/input_error.h"

#if ZPLAN_HAVE_URING
#include <liburing.h>
#endif

namespace zplan::executor {

#if ZPLAN_HAVE_URING
struct SwapFile::Ring {
  io_uring ring;
};
#else
struct SwapFile::Ring {};
#endif

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
  engine_ = "pread/pwrite";
#if ZPLAN_HAVE_URING
  // Under a real-time policy (validate run with chrt to keep other processes off its cores),
  // io_uring's kernel workers would run at normal priority behind everything else and a swap
  // could take a second; blocks are then moved from the swapping thread itself.
  const int policy = sched_getscheduler(0);
  if (policy == SCHED_FIFO || policy == SCHED_RR) {
    engine_ = "pread/pwrite (real-time policy: io_uring's workers would not be)";
    return;
  }
  ring_ = new Ring;
  int rc = io_uring_queue_init(static_cast<unsigned>(queue_depth_), &ring_->ring, 0);
  if (rc == 0) {
    engine_ = "io_uring";
  } else {
    delete ring_;
    ring_ = nullptr;
    engine_ = std::string("pread/pwrite (io_uring refused: ") + std::strerror(-rc) + ")";
  }
#endif
}

SwapFile::~SwapFile() {
#if ZPLAN_HAVE_URING
  if (ring_ != nullptr) {
    io_uring_queue_exit(&ring_->ring);
    delete ring_;
  }
#endif
  if (fd_ >= 0) close(fd_);
}

void SwapFile::transfer(bool write, uint64_t offset, char* buf, size_t bytes) {
  auto fail = [&](const std::string& why) {
    throw InputError(dir_, std::string("NVMe swap ") + (write ? "write" : "read") +
                               " failed: " + why);
  };
#if ZPLAN_HAVE_URING
  if (ring_ != nullptr) {
    // Blocks of block_bytes, queue_depth in flight; a short transfer is resubmitted for the rest.
    io_uring* ring = &ring_->ring;
    size_t next = 0, done = 0;
    int in_flight = 0;
    while (done < bytes) {
      while (in_flight < queue_depth_ && next < bytes) {
        io_uring_sqe* sqe = io_uring_get_sqe(ring);
        if (sqe == nullptr) break;
        const size_t len = std::min(block_bytes_, bytes - next);
        if (write) {
          io_uring_prep_write(sqe, fd_, buf + next, static_cast<unsigned>(len), offset + next);
        } else {
          io_uring_prep_read(sqe, fd_, buf + next, static_cast<unsigned>(len), offset + next);
        }
        io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(next));
        next += len;
        ++in_flight;
      }
      io_uring_submit(ring);
      io_uring_cqe* cqe = nullptr;
      int rc = io_uring_wait_cqe(ring, &cqe);
      if (rc < 0) {
        if (rc == -EINTR) continue;
        fail(std::strerror(-rc));
      }
      const uint64_t at = io_uring_cqe_get_data64(cqe);
      const int res = cqe->res;
      io_uring_cqe_seen(ring, cqe);
      --in_flight;
      if (res < 0) fail(std::strerror(-res));
      const size_t len = std::min(block_bytes_, bytes - static_cast<size_t>(at));
      if (static_cast<size_t>(res) < len) {
        // Rare: do the rest of this block synchronously.
        size_t got = static_cast<size_t>(res);
        while (got < len) {
          ssize_t n = write ? pwrite(fd_, buf + at + got, len - got, static_cast<off_t>(offset + at + got))
                            : pread(fd_, buf + at + got, len - got, static_cast<off_t>(offset + at + got));
          if (n <= 0) fail(n < 0 ? std::strerror(errno) : "short transfer");
          got += static_cast<size_t>(n);
        }
      }
      done += len;
    }
    return;
  }
#endif
  size_t done = 0;
  while (done < bytes) {
    const size_t len = std::min(block_bytes_, bytes - done);
    ssize_t n = write ? pwrite(fd_, buf + done, len, static_cast<off_t>(offset + done))
                      : pread(fd_, buf + done, len, static_cast<off_t>(offset + done));
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      fail(n < 0 ? std::strerror(errno) : "short transfer");
    }
    done += static_cast<size_t>(n);
  }
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
