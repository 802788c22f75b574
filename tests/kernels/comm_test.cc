// The communicator's thread fake (kernels/comm.h): the collectives the executor's tests rely on,
// the control traffic calibration uses, and a rank that never arrives.
#include "kernels/comm.h"

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "base/input_error.h"

namespace zplan::kernels {
namespace {

TEST_CASE("a rank that stops answering fails the others instead of hanging", "[kernels][comm]") {
  // Rank 1 never joins the collective; rank 0 gives up after the timeout with an InputError.
  auto comms = make_thread_comms(2, 1, /*timeout_s=*/0.5);
  std::vector<float> data(16, 1.0f);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(comms[0]->all_reduce(0, data.data(), data.size()), InputError);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(waited < 5);
}

TEST_CASE("the thread communicator's collectives", "[kernels][comm]") {
  std::vector<std::vector<float>> out(2);
  auto comms = make_thread_comms(2, 2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Comm& c = *comms[static_cast<size_t>(r)];
      // all_reduce: [1, 2] + [2, 4] = [3, 6]; reduce_scatter of [r+1, 10(r+1)] blocks;
      // all_gather of one element each.
      std::vector<float> a{float(r + 1), float(2 * (r + 1))};
      c.all_reduce(0, a.data(), 2);
      std::vector<float> rs{float(r + 1), float(10 * (r + 1))};
      c.reduce_scatter(1, rs.data(), 1);
      std::vector<float> g(2);
      float mine = float(100 + r);
      c.all_gather(0, &mine, 1, g.data());
      out[static_cast<size_t>(r)] = {a[0], a[1], rs[0], g[0], g[1]};
    });
  }
  for (auto& t : threads) t.join();
  // reduce_scatter: rank 0 gets block 0 summed (1 + 2 = 3), rank 1 block 1 (10 + 20 = 30).
  CHECK(out[0] == std::vector<float>{3, 6, 3, 100, 101});
  CHECK(out[1] == std::vector<float>{3, 6, 30, 100, 101});
}

TEST_CASE("the thread communicator's control traffic", "[kernels][comm]") {
  auto comms = make_thread_comms(2, 1);
  std::vector<std::vector<double>> out(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Comm& c = *comms[static_cast<size_t>(r)];
      // broadcast from rank 1: both end with 7.5; sum and max of (r + 1) on channel 0.
      double x = r == 1 ? 7.5 : -1.0;
      c.broadcast(&x, sizeof x, 1);
      const double sum = c.sum(double(r + 1));
      const double max = c.max(double(r + 1));
      std::vector<double> all = c.gather_all(0, {double(10 * r)});
      c.barrier();
      out[static_cast<size_t>(r)] = {x, sum, max, all.at(0), all.at(1)};
    });
  }
  for (auto& t : threads) t.join();
  CHECK(out[0] == std::vector<double>{7.5, 3, 2, 0, 10});
  CHECK(out[1] == out[0]);
  CHECK(comms[1]->local_rank() == 1);
  CHECK(comms[1]->local_size() == 2);
  CHECK(comms[0]->nodes() == 1);
  CHECK(comms[0]->hosts().front() == host_name());
  CHECK(comms[0]->library().empty());
}

TEST_CASE("the thread communicator splits into groups", "[kernels][comm]") {
  // 4 ranks; split by rank / 2 (two "nodes"), then by rank % 2 (the same index on each): every
  // group's all_reduce sums only its own ranks, on the channel it is given.
  auto comms = make_thread_comms(4, 2);
  std::vector<std::vector<float>> out(4);
  std::vector<std::vector<int>> where(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      Comm& world = *comms[static_cast<size_t>(r)];
      std::unique_ptr<Comm> node = world.split(r / 2);
      std::unique_ptr<Comm> across = world.split(r % 2);
      float a = float(1 << r), b = float(1 << r);
      node->all_reduce(1, &a, 1);
      across->all_reduce(0, &b, 1);
      std::vector<float> g(2);
      float mine = float(10 * r);
      across->all_gather(1, &mine, 1, g.data());
      out[static_cast<size_t>(r)] = {a, b, g[0], g[1]};
      where[static_cast<size_t>(r)] = {node->rank(), node->size(), across->rank(), across->size(),
                                       node->channels()};
    });
  }
  for (auto& t : threads) t.join();
  CHECK(out[0] == std::vector<float>{3, 5, 0, 20});   // node {0, 1}, across {0, 2}
  CHECK(out[1] == std::vector<float>{3, 10, 10, 30});  // node {0, 1}, across {1, 3}
  CHECK(out[2] == std::vector<float>{12, 5, 0, 20});
  CHECK(out[3] == std::vector<float>{12, 10, 10, 30});
  CHECK(where[0] == std::vector<int>{0, 2, 0, 2, 2});
  CHECK(where[3] == std::vector<int>{1, 2, 1, 2, 2});
}

TEST_CASE("the launcher's rank is read from the environment before MPI starts",
          "[kernels][comm]") {
  // Only where no launcher set it for this test process (ctest runs it without one).
  if (!mpi_launcher_variable().empty()) return;
  CHECK(mpi_launcher_rank() == -1);
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  CHECK(mpi_launcher_rank() == 3);
  setenv("OMPI_COMM_WORLD_RANK", "x", 1);
  CHECK(mpi_launcher_rank() == -1);
  unsetenv("OMPI_COMM_WORLD_RANK");
  setenv("PMI_RANK", "0", 1);
  CHECK(mpi_launcher_rank() == 0);
  unsetenv("PMI_RANK");
}

TEST_CASE("a process alone is one rank whose reductions are the identity", "[kernels][comm]") {
  auto c = make_single_process_comm();
  CHECK(c->rank() == 0);
  CHECK(c->size() == 1);
  CHECK(c->channels() == 1);
  CHECK(c->sum(2.5) == 2.5);
  CHECK(c->max(-1.0) == -1.0);
  int v = 42;
  c->broadcast(&v, sizeof v, 0);
  CHECK(v == 42);
}

}  // namespace
}  // namespace zplan::kernels
