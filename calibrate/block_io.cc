#include "calibrate/block_io.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "calibrate/interrupt.h"
#include "base/input_error.h"

namespace zplan::calibrate {

namespace {

constexpr size_t kAlignment = 4096;  // O_DIRECT: buffer, offset and length aligned (ref §7.4)

std::string errno_text(int err) { return std::strerror(err); }

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};

// queue_depth aligned buffers of one block each, filled with a non-zero pattern (no zero-page
// or compression shortcuts).
class Buffers {
 public:
  explicit Buffers(const kernels::BlockIoSettings& s) {
    for (int i = 0; i < s.queue_depth; ++i) {
      void* p = nullptr;
      if (posix_memalign(&p, kAlignment, s.block_bytes) != 0) throw std::bad_alloc();
      std::memset(p, 0x5a + i, s.block_bytes);
      owned_.emplace_back(static_cast<char*>(p));
      raw_.push_back(static_cast<char*>(p));
    }
  }
  char* const* data() const { return raw_.data(); }

 private:
  std::vector<std::unique_ptr<char, FreeDeleter>> owned_;
  std::vector<char*> raw_;
};

// Runs the transfer with io_uring, or pread/pwrite where io_uring cannot be used; returns seconds.
double transfer(const ScratchFile& f, bool write, size_t bytes, const kernels::BlockIoSettings& s,
                std::string* engine) {
  const size_t blocks = (bytes + s.block_bytes - 1) / s.block_bytes;
  Buffers buffers(s);
  auto start = std::chrono::steady_clock::now();
  kernels::BlockTransfer io(s.queue_depth);
  if (io.uring()) {
    *engine = "io_uring";
  } else {
    start = std::chrono::steady_clock::now();
    *engine = std::string("pread/pwrite (") +
              (kernels::BlockTransfer::uring_built_in()
                   ? std::string("io_uring_queue_init: ") + std::strerror(io.uring_error())
                   : std::string("io_uring not built in: configure with liburing-dev installed")) +
              ")";
  }
  char* const* slots = buffers.data();
  io.run(
      f.fd(), write, blocks,
      [&](size_t i, int slot) {
        return kernels::IoBlock{slots[slot], static_cast<uint64_t>(i * s.block_bytes),
                                s.block_bytes};
      },
      f.dir(), "");
  if (write && fdatasync(f.fd()) != 0) {
    throw InputError(f.dir(), "fdatasync failed: " + errno_text(errno));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

ScratchFile::ScratchFile(const std::string& dir) : dir_(dir) {
  std::string path = (dir.empty() ? std::string(".") : dir) + "/.zplan-calibrate-XXXXXX";
  int fd = mkstemp(path.data());
  if (fd < 0) {
    throw InputError(dir, "cannot create a scratch file for the NVMe probe: " + errno_text(errno));
  }
  int slot = register_temp_path(path);
  int direct = open(path.c_str(), O_RDWR | O_DIRECT);
  const int direct_errno = errno;
  unlink(path.c_str());
  unregister_temp_path(slot);
  if (direct >= 0) {
    close(fd);
    fd_ = direct;
    o_direct_ = true;
  } else {
    // EINVAL on file systems without O_DIRECT (tmpfs): buffered I/O, page cache dropped.
    fd_ = fd;
    o_direct_ = false;
    note_ = "no O_DIRECT at " + dir + " (open: " + errno_text(direct_errno) +
            "): buffered I/O with fdatasync, page cache dropped before reading";
  }
}

ScratchFile::~ScratchFile() {
  if (fd_ >= 0) close(fd_);
}

double sequential_write(const ScratchFile& file, size_t bytes,
                        const kernels::BlockIoSettings& settings, std::string* engine) {
  return transfer(file, /*write=*/true, bytes, settings, engine);
}

double sequential_read(const ScratchFile& file, size_t bytes,
                       const kernels::BlockIoSettings& settings, std::string* engine) {
  if (!file.o_direct()) posix_fadvise(file.fd(), 0, 0, POSIX_FADV_DONTNEED);
  return transfer(file, /*write=*/false, bytes, settings, engine);
}

}  // namespace zplan::calibrate
