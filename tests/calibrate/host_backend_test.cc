// The host backend's parts: the block-I/O kernels it times, and a tiny run of the whole
// backend that must produce a CPU profile zplan can load. Its timings are not asserted: the
// machine is shared, and performance is measured by `zplan calibrate`, not by unit tests.
#include "calibrate/host_backend.h"

#include <algorithm>
#include <thread>
#include <vector>

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "calibrate/block_io.h"
#include "calibrate/calibrate.h"
#include "base/input_error.h"
#include "kernels/cpu_threads.h"
#include "tests/calibrate/calibrate_test_util.h"

namespace zplan::calibrate {
namespace {

using testing::TempDir;

TEST_CASE("scratch files leave nothing behind", "[calibrate][host]") {
  TempDir dir;
  REQUIRE(!dir.path().empty());
  {
    ScratchFile f(dir.path());
    CHECK(TempDir::entries(dir.path()).empty());  // unlinked as soon as it was open
    kernels::BlockIoSettings s;
    s.block_bytes = 1 << 20;
    s.queue_depth = 8;
    std::string engine;
    CHECK(sequential_write(f, 4 << 20, s, &engine) > 0);
    CHECK(!engine.empty());
    CHECK(sequential_read(f, 4 << 20, s, &engine) > 0);
    struct stat st;
    REQUIRE(fstat(f.fd(), &st) == 0);
    CHECK(st.st_size == 4 << 20);
    CHECK(st.st_nlink == 0);
  }
  CHECK(TempDir::entries(dir.path()).empty());
}

TEST_CASE("a directory without O_DIRECT falls back and says so", "[calibrate][host]") {
  struct stat st;
  if (stat("/dev/shm", &st) != 0) return;
  ScratchFile f("/dev/shm");
  if (f.o_direct()) return;  // this kernel's tmpfs accepts O_DIRECT
  CHECK_THAT(f.note(), Catch::StartsWith("no O_DIRECT at /dev/shm (open: "));
  std::string engine;
  CHECK(sequential_write(f, 1 << 20, kernels::BlockIoSettings{}, &engine) > 0);
}

TEST_CASE("a missing --nvme-path stops the host backend before it measures", "[calibrate][host]") {
  CalibrateOptions o;
  o.backends = "host";
  o.probe.sweep = Sweep::kTiny;
  o.probe.nvme_path = "/nonexistent/zplan";
  auto group = kernels::make_single_process_comm();
  Progress quiet(nullptr);
  CHECK_THROWS_WITH(calibrate(o, *group, quiet),
                    "/nonexistent/zplan: cannot create a scratch file for the NVMe probe: No such "
                    "file or directory");
}

TEST_CASE("threads per rank: the node's CPUs shared by its ranks", "[calibrate][host]") {
  ProbeOptions o;
  CHECK(threads_per_rank(o, 16, 8, 16) == 2);
  CHECK(threads_per_rank(o, 2, 2, 2) == 1);
  CHECK(threads_per_rank(o, 2, 4, 2) == 1);
  // mpirun's default --bind-to core for 2 ranks on a 16-CPU node: one thread on the one core,
  // not 8 threads taking turns on it.
  CHECK(threads_per_rank(o, 16, 2, 1) == 1);
  // Bound to a socket of 8 CPUs with 4 ranks per node of 16: the share, 4.
  CHECK(threads_per_rank(o, 16, 4, 8) == 4);
  CHECK(threads_per_rank(o, 16, 2, 0) == 1);
  o.threads = 3;
  CHECK(threads_per_rank(o, 2, 2, 1) == 3);
  CHECK(kernels::usable_cpus() >= 1);
  CHECK(kernels::usable_cpus() <= static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  CpuInfo cpu = read_cpu_info();
  CHECK(cpu.online_cpus >= 1);
  CHECK(cpu.memory_bytes > 0);
  CHECK(!cpu.model.empty());
}

TEST_CASE("a tiny host calibration builds a CPU profile zplan loads", "[calibrate][host][blas]") {
  TempDir dir;
  CalibrateOptions o;
  o.backends = "host";
  o.probe.sweep = Sweep::kTiny;
  o.probe.nvme_path = dir.path();
  o.name = "tiny-host";
  auto group = kernels::make_single_process_comm();
  Progress quiet(nullptr);
  Calibration c = calibrate(o, *group, quiet);
  CHECK(TempDir::entries(dir.path()).empty());
  const HostMeasurements& h = c.measurements.host;
  REQUIRE(h.measured);
  CHECK(h.h2d_pinned_bytes_per_s > 0);
  CHECK(h.triad_bytes_per_s_per_rank > 0);
  CHECK(h.adam_params_per_s_per_rank > 0);
  CHECK(h.nvme_read_bytes_per_s_node > 0);
  CHECK(h.nvme_write_bytes_per_s_node > 0);
  CHECK(h.gemms.size() == host_sizes(Sweep::kTiny).gemms.size());
  REQUIRE(c.built.has_value());
  const hardware::Profile& p = c.built->profile;
  CHECK(p.name == "tiny-host");
  CHECK(p.gpu.arch == hardware::Arch::kCpu);
  CHECK(p.node.intra_link == hardware::IntraLink::kSharedMemory);
  CHECK(p.node.gpus_per_node == 1);
  CHECK(p.gpu.peak_fp32_flops_per_s > 0);
  CHECK(p.node.cpu_adam_params_per_s_per_core ==
        Approx(h.adam_params_per_s_per_rank / h.threads_per_rank));
  CHECK(p.collectives.empty());
  // Round trip through the file format.
  hardware::Profile again = hardware::profile_from_json(hardware::profile_to_json(p), "again.json");
  CHECK(hardware::profile_to_json(again) == hardware::profile_to_json(p));
}

TEST_CASE("the quick host calibration", "[.slow][calibrate-slow]") {
  TempDir dir;
  CalibrateOptions o;
  o.backends = "host";
  o.probe.nvme_path = dir.path();
  auto group = kernels::make_single_process_comm();
  Progress quiet(nullptr);
  Calibration c = calibrate(o, *group, quiet);
  REQUIRE(c.built.has_value());
  CHECK(c.built->profile.gpu.gemm_efficiency.size() >= 5);
  CHECK(TempDir::entries(dir.path()).empty());
}

}  // namespace
}  // namespace zplan::calibrate
