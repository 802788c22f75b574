// The io_uring engine (liburing): queue_depth requests in flight, each refilled as it completes,
// as DeepSpeed's aio handle keeps its queue full.
#include <cstring>
#include <vector>

#include <liburing.h>

#include "kernels/block_transfer.h"
#include "models/input_error.h"

namespace zplan::kernels::internal {

IoStatus uring_transfer(int fd, bool write, size_t blocks, const BlockIoSettings& settings,
                        char* const* buffers, const std::string& dir, std::string* why) {
  struct io_uring ring;
  const unsigned depth = static_cast<unsigned>(settings.queue_depth);
  int rc = io_uring_queue_init(depth, &ring, 0);
  if (rc < 0) {
    *why = std::string("io_uring_queue_init: ") + std::strerror(-rc);
    return IoStatus::kUnavailable;
  }
  struct RingCloser {
    struct io_uring* ring;
    ~RingCloser() { io_uring_queue_exit(ring); }
  } closer{&ring};

  const size_t block = settings.block_bytes;
  std::vector<int> free_slots;
  for (int i = settings.queue_depth - 1; i >= 0; --i) free_slots.push_back(i);
  size_t next = 0, done = 0, in_flight = 0;
  while (done < blocks) {
    while (in_flight < depth && next < blocks) {
      struct io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      if (sqe == nullptr) break;
      int slot = free_slots.back();
      free_slots.pop_back();
      const off_t offset = static_cast<off_t>(next * block);
      if (write) {
        io_uring_prep_write(sqe, fd, buffers[slot], static_cast<unsigned>(block), offset);
      } else {
        io_uring_prep_read(sqe, fd, buffers[slot], static_cast<unsigned>(block), offset);
      }
      io_uring_sqe_set_data64(sqe, static_cast<unsigned long long>(slot));
      ++next;
      ++in_flight;
    }
    rc = io_uring_submit(&ring);
    if (rc < 0) throw InputError(dir, std::string("io_uring_submit: ") + std::strerror(-rc));
    struct io_uring_cqe* cqe = nullptr;
    rc = io_uring_wait_cqe(&ring, &cqe);
    if (rc < 0) throw InputError(dir, std::string("io_uring_wait_cqe: ") + std::strerror(-rc));
    const int res = cqe->res;
    const int slot = static_cast<int>(io_uring_cqe_get_data64(cqe));
    io_uring_cqe_seen(&ring, cqe);
    if (res < 0) {
      throw InputError(dir,
                       std::string(write ? "write" : "read") + " failed: " + std::strerror(-res));
    }
    if (static_cast<size_t>(res) != block) {
      throw InputError(dir, std::string("short ") + (write ? "write" : "read") + " of " +
                                std::to_string(res) + " bytes (disk full?)");
    }
    free_slots.push_back(slot);
    --in_flight;
    ++done;
  }
  return IoStatus::kDone;
}

}  // namespace zplan::kernels::internal
