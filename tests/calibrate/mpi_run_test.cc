// `zplan calibrate` under mpirun with two ranks, end to end (the CPU-only calibration of
// docs/calibration.md §1 with the tiny sweep): slow-tagged, since it starts an MPI job.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <sys/wait.h>

#include <catch2/catch.hpp>

#include "hardware/profile.h"
#include "kernels/config.h"
#include "tests/calibrate/calibrate_test_util.h"

namespace zplan::calibrate {
namespace {

using hardware::Collective;
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

// scripts/two-node.sh: 2 nodes of 2 ranks in network namespaces joined by a rate-limited link;
// calibration across them must give both tiers, and validate must run across them with the
// measured profile and with the two-tier model (the cross-node tables out). Skips where the
// namespaces cannot be made (the script says why). Structure only: no timing is asserted.
TEST_CASE("calibrate and validate across two network-namespace nodes", "[.slow][calibrate-slow]") {
  TempDir dir;
  const std::string out = dir.path() + "/two-node";
  // Real-time priority for the calibration: on a loaded machine the tiny sweep's single blocks
  // are otherwise noise, and a fitted beta can leave the profile's range.
  const std::string cmd = std::string("RT_PRIORITY=5 SWEEP=tiny STEPS=1 CELLS=3 ") +
                          ZPLAN_SOURCE_DIR + "/scripts/two-node.sh measure " + ZPLAN_BINARY + " " +
                          out + " > " + dir.path() + "/.stdout 2>&1";
  int status = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(status));
  std::string printed;
  if (FILE* f = std::fopen((dir.path() + "/.stdout").c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) printed.append(buf, n);
    std::fclose(f);
  }
  if (WEXITSTATUS(status) == 77) {
    WARN(printed);  // "two-node: skipped: REASON"
    return;
  }
  INFO(printed);
  REQUIRE(WEXITSTATUS(status) == 0);
  hardware::Profile p = hardware::load_profile(out + "/profile.json");
  CHECK(p.node.gpus_per_node == 2);
  CHECK(p.provenance["hosts"].size() == 2);
  for (Collective op :
       {Collective::kAllGather, Collective::kReduceScatter, Collective::kAllReduce}) {
    CHECK(p.find_collective(op, 2, 1) != nullptr);  // each node's ranks: shared memory
    CHECK(p.find_collective(op, 4, 2) != nullptr);  // all ranks: across the link
  }
  CHECK(p.network.nics_per_node == 1);
  CHECK(p.network.latency_s > 0);
  CHECK(p.sources["/network/latency_us"].get<std::string>().find("intra-node steps") !=
        std::string::npos);
  hardware::Profile model = hardware::load_profile(out + "/model.json");
  CHECK(model.collectives.size() == 3);
  for (const auto& t : model.collectives) CHECK(t.nodes == 1);
  for (const char* prof : {"profile", "model"}) {
    std::ifstream in(out + "/validate-3-" + prof + ".json");
    REQUIRE(in.good());
    nlohmann::json v = nlohmann::json::parse(in)["validation"];
    CHECK(v["time"][0]["name"] == "step time");
    CHECK(v["time"][0]["measured"].get<double>() > 0);
    CHECK(v["time"][0]["predicted"].get<double>() > 0);
  }
  CHECK(printed.find("| 3 | model |") != std::string::npos);
}
#endif

}  // namespace
}  // namespace zplan::calibrate
