// The backend registry: what it lists, how --backend is parsed, and the one-line messages for
// unknown and not-compiled backends.
#include "calibrate/registry.h"

#include <catch2/catch.hpp>

#include "kernels/config.h"
#include "base/input_error.h"

namespace zplan::calibrate {
namespace {

TEST_CASE("the registry lists every backend and what this build has", "[calibrate][registry]") {
  std::vector<BackendInfo> known = known_backends();
  REQUIRE(known.size() == 5);
  CHECK(known[0].name == "host");
  CHECK(known[1].name == "mpi");
  CHECK(known[2].name == "cuda");
  CHECK(known[3].name == "nccl");
  CHECK(known[4].name == "fake");
  CHECK(known[0].compiled);
  CHECK(known[4].compiled);
  CHECK(known[1].compiled == (ZPLAN_HAVE_MPI == 1));
  CHECK(known[2].compiled == (ZPLAN_HAVE_CUDA == 1));
  CHECK(known[3].compiled == (ZPLAN_HAVE_NCCL == 1));
  nlohmann::json features = build_features();
  CHECK(features["blas"] == (ZPLAN_HAVE_BLAS == 1));
  CHECK(features["io_uring"] == (ZPLAN_HAVE_URING == 1));
}

TEST_CASE("backend lists from --backend", "[calibrate][registry]") {
  CHECK(parse_backend_list("host,fake") == std::vector<std::string>{"host", "fake"});
  CHECK(parse_backend_list("auto") == std::vector<std::string>{"auto"});
  CHECK(parse_backend_list("Host,FAKE") == std::vector<std::string>{"host", "fake"});  // any case
  CHECK(parse_backend_list("AUTO") == std::vector<std::string>{"auto"});
  CHECK_THROWS_WITH(parse_backend_list("host,,fake"),
                    "--backend: has an empty item in 'host,,fake'");
  CHECK_THROWS_WITH(parse_backend_list("host,host"), "--backend: lists 'host' twice");
  CHECK_THROWS_WITH(parse_backend_list("auto,host"),
                    "--backend: 'auto' cannot be combined with others");
  CHECK_THROWS_WITH(parse_backend_list(""), Catch::StartsWith("--backend: is empty; available: "));
  CHECK_THROWS_WITH(parse_backend_list("gloo"),
                    Catch::StartsWith("unknown backend 'gloo'; known: host, mpi, cuda, nccl, "
                                      "fake; available in this zplan: host"));
}

TEST_CASE("a backend this build lacks gives one line saying how to get it",
          "[calibrate][registry]") {
  // A build configured without CUDA and NCCL.
  std::vector<BackendInfo> known = known_backends();
  for (BackendInfo& b : known) {
    if (b.name == "cuda" || b.name == "nccl") b.compiled = false;
    if (b.name == "mpi") b.compiled = true;
  }
  CHECK_THROWS_WITH(parse_backend_list("host,nccl", known),
                    "backend 'nccl' is not compiled into this zplan (configure with "
                    "-DZPLAN_WITH_NCCL=ON); available: host, mpi, fake");
  CHECK_THROWS_WITH(parse_backend_list("cuda", known),
                    "backend 'cuda' is not compiled into this zplan (configure with "
                    "-DZPLAN_WITH_CUDA=ON); available: host, mpi, fake");
  CHECK(parse_backend_list("mpi", known) == std::vector<std::string>{"mpi"});
}

TEST_CASE("every compiled backend can be made", "[calibrate][registry]") {
  for (const std::string& name : compiled_backends()) {
    CHECK(make_backend(name)->name() == name);
  }
}

TEST_CASE("outside mpirun the run is one process", "[calibrate][registry]") {
  if (!kernels::mpi_launcher_variable().empty())
    return;  // the test binary itself runs under mpirun
  auto g = make_process_comm();
  CHECK(g->size() == 1);
  CHECK(g->rank() == 0);
  CHECK(g->nodes() == 1);
  CHECK(g->library().empty());
  // auto on this machine: host, plus cuda/nccl only with a GPU, mpi only with more ranks.
  std::vector<std::string> names = auto_backends(*g);
  CHECK(names.front() == "host");
  CHECK(std::find(names.begin(), names.end(), "mpi") == names.end());
}

}  // namespace
}  // namespace zplan::calibrate
