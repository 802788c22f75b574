// The block I/O engine the NVMe probe and the executor's swap file share
// (kernels/block_transfer.h): what it writes comes back, with io_uring and with pread/pwrite, and
// a transfer that runs past the end of the file fails with a message instead of returning short.
#include "kernels/block_transfer.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "base/input_error.h"

namespace zplan::kernels {
namespace {

// An unlinked temporary file, closed at the end of the scope.
class TempFd {
 public:
  TempFd() : f_(std::tmpfile()) { REQUIRE(f_ != nullptr); }
  ~TempFd() { std::fclose(f_); }
  int fd() const { return fileno(f_); }

 private:
  std::FILE* f_;
};

TEST_CASE("block transfers write and read back whole and partial blocks", "[kernels][block_io]") {
  for (bool use_uring : {true, false}) {
    BlockTransfer io(/*queue_depth=*/3, use_uring);
    if (!use_uring) CHECK(!io.uring());
    INFO("io_uring: " << io.uring());
    TempFd file;
    const size_t block = 4096, bytes = 5 * block + 100;  // 6 blocks, the last one partial
    std::vector<char> out(bytes), in(bytes, 0);
    for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<char>(i * 7 % 251);
    auto blocks = [&](std::vector<char>& buf) {
      return [&buf, block, bytes](size_t i, int slot) {
        CHECK(slot >= 0);
        CHECK(slot < 3);
        const size_t at = i * block;
        return IoBlock{buf.data() + at, at, std::min(block, bytes - at)};
      };
    };
    const size_t count = (bytes + block - 1) / block;
    io.run(file.fd(), /*write=*/true, count, blocks(out), "test", "");
    io.run(file.fd(), /*write=*/false, count, blocks(in), "test", "");
    CHECK(in == out);

    // One block more than the file holds: the read comes back short (or empty) and the rest
    // cannot be had, so the transfer fails and says where.
    std::vector<char> big(bytes + block);
    auto past_end = [&](size_t, int) { return IoBlock{big.data(), 0, big.size()}; };
    CHECK_THROWS_WITH(
        io.run(file.fd(), false, 1, past_end, "scratch", "test "),
        Catch::Contains("scratch") && Catch::Contains("test read failed: no progress"));
  }
}

}  // namespace
}  // namespace zplan::kernels
