// `zplan calibrate` under mpirun with two ranks, end to end (the CPU-only calibration of
// docs/calibration.md §1 with the tiny sweep): slow-tagged, since it starts an MPI job.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <sys/wait.h>

#include <catch2/catch.hpp>

#include "hardware/profile.h"
#include "kernels/config.h"
#include "tests/calibrate/calibrate_test_util.h"

namespace zplan::calibrate {
namespace {

using testing::TempDir;

#if defined(ZPLAN_BINARY) && ZPLAN_HAVE_MPI
TEST_CASE("two MPI ranks calibrate host and mpi into one profile", "[.slow][calibrate-slow]") {
  if (std::system("command -v mpirun > /dev/null 2>&1") != 0) {
    WARN("no mpirun on PATH");
    return;
  }
  TempDir dir;
  const std::string out = dir.path() + "/cpu.json";
  const std::string cmd = std::string("mpirun --allow-run-as-root --oversubscribe -np 2 ") +
                          ZPLAN_BINARY + " calibrate --backend host,mpi --sweep tiny --nvme-path " +
                          dir.path() + " --out " + out + " > " + dir.path() + "/.stdout 2>&1";
  int status = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  hardware::Profile p = hardware::load_profile(out);
  CHECK(p.gpu.arch == hardware::Arch::kCpu);
  CHECK(p.node.gpus_per_node == 2);
  CHECK(p.collectives.size() == 3);
  for (const hardware::CollectiveTable& t : p.collectives) {
    CHECK(t.ranks == 2);
    CHECK(t.nodes == 1);
  }
  CHECK(p.provenance["ranks"] == 2);
  CHECK(p.provenance["versions"]["mpi"].get<std::string>().find("MPI") != std::string::npos);
  std::remove((dir.path() + "/.stdout").c_str());
  CHECK(TempDir::entries(dir.path()) == std::vector<std::string>{"cpu.json"});
}
#endif

}  // namespace
}  // namespace zplan::calibrate
