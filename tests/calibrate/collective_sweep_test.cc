// nccl-tests' conventions in the collective sweep: sizes, bus factors, the timing loop and the
// table it prints (reference/nccl_hardware.md §2).
#include "calibrate/collective_sweep.h"

#include <sstream>

#include <catch2/catch.hpp>

#include "calibrate/fake_backend.h"
#include "base/input_error.h"

namespace zplan::calibrate {
namespace {

using hardware::Collective;

// A bench whose operations take exactly alpha + S / bw; it records what it was asked to run.
class ExactBench : public CollectiveBench {
 public:
  int ranks() const override { return 4; }
  int nodes() const override { return 1; }
  std::string backend() const override { return "exact"; }
  void reserve(double max_bytes) override { reserved = max_bytes; }
  double run(Collective op, int64_t count, int iters, bool in_place) override {
    double bytes = op == Collective::kAllReduce ? count * 4.0 : count * 4.0 * ranks();
    calls.push_back({count, iters});
    // In place saves a microsecond (no copy of the input), so the two columns can be told apart.
    return iters * (10e-6 - (in_place ? 1e-6 : 0) + bytes / 1e9);
  }
  double reserved = 0;
  std::vector<std::pair<int64_t, int>> calls;
};

TEST_CASE("bus factors are nccl-tests'", "[calibrate][sweep]") {
  // PERFORMANCE.md: all_reduce 2(n-1)/n, all_gather and reduce_scatter (n-1)/n.
  CHECK(bus_factor(Collective::kAllReduce, 8) == Approx(14.0 / 8));
  CHECK(bus_factor(Collective::kAllGather, 8) == Approx(7.0 / 8));
  CHECK(bus_factor(Collective::kReduceScatter, 2) == Approx(0.5));
  CHECK(bus_factor(Collective::kAllReduce, 2) == Approx(1.0));
}

TEST_CASE("sizes and counts follow nccl-tests", "[calibrate][sweep]") {
  // all_gather / reduce_scatter: S is the total buffer, count the per-rank elements, rounded down:
  // 100 B on 8 ranks of 4-byte floats -> 3 elements per rank, S = 96.
  CollectiveSize ag = collective_size(Collective::kAllGather, 100, 8);
  CHECK(ag.count == 3);
  CHECK(ag.bytes == 96);
  // all_reduce: the per-rank buffer. 100 B -> 25 floats.
  CollectiveSize ar = collective_size(Collective::kAllReduce, 100, 8);
  CHECK(ar.count == 25);
  CHECK(ar.bytes == 100);
  CHECK(collective_size(Collective::kReduceScatter, 16, 8).count == 0);
  CHECK(geometric_sizes(8, 64, 2) == std::vector<double>{8, 16, 32, 64});
}

TEST_CASE("sweep settings: presets, overrides, bad values", "[calibrate][sweep]") {
  ProbeOptions o;
  SweepSettings quick = sweep_settings(o, false);
  CHECK(quick.min_bytes == 8);
  CHECK(quick.max_bytes == 64.0 * 1024 * 1024);
  o.sweep = Sweep::kFull;
  CHECK(sweep_settings(o, true).max_bytes == 8.0 * 1024 * 1024 * 1024);  // nccl-tests -e 8G
  CHECK(sweep_settings(o, false).max_bytes == 1.0 * 1024 * 1024 * 1024);
  o.min_bytes = 1024;
  o.max_bytes = 4096;
  o.step_factor = 4;
  SweepSettings s = sweep_settings(o, true);
  CHECK(geometric_sizes(s.min_bytes, s.max_bytes, s.factor) == std::vector<double>{1024, 4096});
  o.step_factor = 1;
  CHECK_THROWS_WITH(sweep_settings(o, true), Catch::StartsWith("--step-factor: "));
  o.step_factor = 2;
  o.max_bytes = 512;
  CHECK_THROWS_WITH(sweep_settings(o, true), Catch::StartsWith("--max-bytes: "));
}

TEST_CASE("the timing loop: warm-up, iterations per block, time per operation",
          "[calibrate][sweep]") {
  ExactBench bench;
  auto group = kernels::make_single_process_comm();
  Progress quiet(nullptr);
  SweepSettings s;
  s.min_bytes = 64;
  s.max_bytes = 1 << 20;
  s.factor = 16;
  s.warmup_iters = 5;
  s.repeats = 3;
  s.target_block_s = 1e-3;
  s.max_iters = 50;
  CollectiveMeasurement m = sweep_collective(bench, *group, Collective::kAllGather, s, quiet);
  CHECK(bench.reserved == 1 << 20);
  CHECK(m.backend == "exact");
  CHECK(m.redop == "none");
  REQUIRE(m.rows.size() == 4);  // 64 B (4 floats per rank), 1 KiB, 16 KiB, 256 KiB
  for (const CollectiveRow& r : m.rows) {
    // t = 10 us + S / 1 GB/s out of place, 9 us + S / 1 GB/s in place; algbw = S / t and busbw =
    // algbw (n-1)/n of the in-place time, which the profile keeps.
    CHECK(r.oop_time_s == Approx(10e-6 + r.bytes / 1e9));
    CHECK(r.time_s == Approx(9e-6 + r.bytes / 1e9));
    CHECK(r.algbw_bytes_per_s == Approx(r.bytes / r.time_s));
    CHECK(r.busbw_bytes_per_s == Approx(r.algbw_bytes_per_s * 0.75));
    // A block lasts about target_block_s: ceil(1 ms / t) for the out-of-place t, at most 50.
    CHECK(r.iters == std::min(50, static_cast<int>(std::ceil(1e-3 / r.oop_time_s - 1e-9))));
  }
  // Per size: 1 warm-up operation alone, the rest of the warm-up (4), then 3 timed blocks out of
  // place and 3 in place.
  REQUIRE(bench.calls.size() == 4 * 8);
  CHECK(bench.calls[0].second == 1);
  CHECK(bench.calls[1].second == 4);
  CHECK(bench.calls[2].second == m.rows[0].iters);
}

TEST_CASE("one slow operation skips the rest of the warm-up", "[calibrate][sweep]") {
  ExactBench bench;
  auto group = kernels::make_single_process_comm();
  Progress quiet(nullptr);
  SweepSettings s;
  s.min_bytes = s.max_bytes = 64e6;  // 64 ms per operation, beyond a 5 ms block; 5 repeats
  CollectiveMeasurement m = sweep_collective(bench, *group, Collective::kAllReduce, s, quiet);
  REQUIRE(m.rows.size() == 1);
  CHECK(m.rows[0].iters == 1);
  CHECK(bench.calls.size() == 1 + 5 + 5);
}

TEST_CASE("the table prints like nccl-tests", "[calibrate][sweep]") {
  FakeCollectiveBench bench(default_fake_spec(), 0);
  auto group = kernels::make_single_process_comm();
  Progress quiet(nullptr);
  ProbeOptions o;
  o.sweep = Sweep::kTiny;
  CollectiveMeasurement m =
      sweep_collective(bench, *group, Collective::kAllReduce, sweep_settings(o, true), quiet);
  std::ostringstream out;
  print_collective_table(out, m, nullptr);
  const std::string text = out.str();
  CHECK_THAT(text, Catch::StartsWith("# all_reduce (fake): 8 ranks on 1 node, float sum"));
  CHECK_THAT(text, Catch::Contains("#       size         count      type   redop      time   "
                                   "algbw   busbw      time   algbw   busbw\n"
                                   "#        (B)    (elements)                        (us)  "
                                   "(GB/s)  (GB/s)      (us)  (GB/s)  (GB/s)\n"));
  CHECK_THAT(text, Catch::Contains("# Avg bus bandwidth    : "));
  // The 8-byte row: 2 floats, ~5 us.
  CHECK_THAT(text, Catch::Contains("\n           8             2     float     sum      "));
}

}  // namespace
}  // namespace zplan::calibrate
