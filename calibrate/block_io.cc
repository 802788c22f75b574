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
#include "kernels/block_transfer.h"
#include "models/input_error.h"

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
  explicit Buffers(const BlockIoSettings& s) {
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

void sync_transfer(int fd, bool write, size_t blocks, const BlockIoSettings& s,
                   char* const* buffers, const std::string& dir) {
  for (size_t i = 0; i < blocks; ++i) {
    char* buf = buffers[i % size_t(s.queue_depth)];
    const off_t offset = static_cast<off_t>(i * s.block_bytes);
    size_t left = s.block_bytes;
    while (left > 0) {
      ssize_t n = write ? pwrite(fd, buf, left, offset + off_t(s.block_bytes - left))
                        : pread(fd, buf, left, offset + off_t(s.block_bytes - left));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        throw InputError(dir,
                         std::string(write ? "write" : "read") + " failed: " + errno_text(errno));
      }
      if (n == 0) throw InputError(dir, "unexpected end of the scratch file");
      left -= static_cast<size_t>(n);
    }
  }
}

// Runs the transfer with io_uring, or pread/pwrite where io_uring cannot be used; returns seconds.
double transfer(const ScratchFile& f, bool write, size_t bytes, const BlockIoSettings& s,
                std::string* engine) {
  const size_t blocks = (bytes + s.block_bytes - 1) / s.block_bytes;
  Buffers buffers(s);
  std::string why;
  auto start = std::chrono::steady_clock::now();
  internal::IoStatus status =
      internal::uring_transfer(f.fd(), write, blocks, s, buffers.data(), f.dir(), &why);
  if (status == internal::IoStatus::kUnavailable) {
    start = std::chrono::steady_clock::now();
    sync_transfer(f.fd(), write, blocks, s, buffers.data(), f.dir());
    *engine = "pread/pwrite (" + why + ")";
  } else {
    *engine = "io_uring";
  }
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

double sequential_write(const ScratchFile& file, size_t bytes, const BlockIoSettings& settings,
                        std::string* engine) {
  return transfer(file, /*write=*/true, bytes, settings, engine);
}

double sequential_read(const ScratchFile& file, size_t bytes, const BlockIoSettings& settings,
                       std::string* engine) {
  if (!file.o_direct()) posix_fadvise(file.fd(), 0, 0, POSIX_FADV_DONTNEED);
  return transfer(file, /*write=*/false, bytes, settings, engine);
}

}  // namespace zplan::calibrate
