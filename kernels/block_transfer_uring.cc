// BlockTransfer's io_uring engine (liburing, built with ZPLAN_HAVE_URING): queue_depth blocks in
// flight, each slot refilled as its block completes, as DeepSpeed's aio handle keeps its queue
// full; a short completion is resubmitted for the rest of its block.
#include <cerrno>
#include <cstring>
#include <vector>

#include <liburing.h>

#include "kernels/block_transfer.h"

namespace zplan::kernels {

namespace internal {
[[noreturn]] void throw_transfer_error(bool write, const std::string& where,
                                       const std::string& what, const std::string& why);
}  // namespace internal

struct BlockTransfer::Ring {
  io_uring ring;
};

BlockTransfer::BlockTransfer(int queue_depth, bool use_uring)
    : queue_depth_(queue_depth < 1 ? 1 : queue_depth) {
  if (!use_uring) return;
  ring_ = new Ring;
  int rc = io_uring_queue_init(static_cast<unsigned>(queue_depth_), &ring_->ring, 0);
  if (rc < 0) {
    delete ring_;
    ring_ = nullptr;
    uring_error_ = -rc;
  }
}

BlockTransfer::~BlockTransfer() {
  if (ring_ == nullptr) return;
  io_uring_queue_exit(&ring_->ring);
  delete ring_;
}

bool BlockTransfer::uring_built_in() { return true; }

void BlockTransfer::run_uring(int fd, bool write, size_t count, const BlockSource& block,
                              const std::string& where, const std::string& what) const {
  auto fail = [&](const std::string& why) {
    internal::throw_transfer_error(write, where, what, why);
  };
  io_uring* ring = &ring_->ring;
  struct Pending {
    IoBlock block;
    size_t done = 0;
  };
  std::vector<Pending> pending(static_cast<size_t>(queue_depth_));
  std::vector<int> free_slots;
  for (int i = queue_depth_ - 1; i >= 0; --i) free_slots.push_back(i);
  std::vector<int> partial;  // slots whose block completed short: their rest goes in again
  size_t next = 0, finished = 0;
  int in_flight = 0;
  while (finished < count) {
    while (in_flight < queue_depth_ && (!partial.empty() || next < count)) {
      io_uring_sqe* sqe = io_uring_get_sqe(ring);
      if (sqe == nullptr) break;
      int slot;
      if (!partial.empty()) {
        slot = partial.back();
        partial.pop_back();
      } else {
        slot = free_slots.back();
        free_slots.pop_back();
        pending[static_cast<size_t>(slot)] = Pending{block(next, slot), 0};
        ++next;
      }
      const Pending& p = pending[static_cast<size_t>(slot)];
      char* buf = p.block.buf + p.done;
      const unsigned len = static_cast<unsigned>(p.block.len - p.done);
      const uint64_t offset = p.block.offset + p.done;
      if (write) {
        io_uring_prep_write(sqe, fd, buf, len, offset);
      } else {
        io_uring_prep_read(sqe, fd, buf, len, offset);
      }
      io_uring_sqe_set_data64(sqe, static_cast<unsigned long long>(slot));
      ++in_flight;
    }
    int rc = io_uring_submit(ring);
    if (rc == -EINTR) continue;  // the queued entries stay queued: submit them again
    if (rc < 0) fail(std::string("io_uring_submit: ") + std::strerror(-rc));
    io_uring_cqe* cqe = nullptr;
    rc = io_uring_wait_cqe(ring, &cqe);
    if (rc == -EINTR) continue;
    if (rc < 0) fail(std::string("io_uring_wait_cqe: ") + std::strerror(-rc));
    const int res = cqe->res;
    const int slot = static_cast<int>(io_uring_cqe_get_data64(cqe));
    io_uring_cqe_seen(ring, cqe);
    --in_flight;
    Pending& p = pending[static_cast<size_t>(slot)];
    if (res == -EINTR || res == -EAGAIN) {
      partial.push_back(slot);
      continue;
    }
    if (res < 0) fail(std::strerror(-res));
    if (res == 0) {
      fail("no progress at byte " + std::to_string(p.block.offset + p.done) +
           " (end of the file, or the disk is full)");
    }
    p.done += static_cast<size_t>(res);
    if (p.done < p.block.len) {
      partial.push_back(slot);
      continue;
    }
    free_slots.push_back(slot);
    ++finished;
  }
}

}  // namespace zplan::kernels
