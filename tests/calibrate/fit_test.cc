// The fits: weighted alpha-beta regressions on closed-form data, regime detection, and recovery
// of the fake backend's known alpha and beta through the whole sweep (its seeded noise included).
#include "calibrate/fit.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "base/units.h"
#include "calibrate/collective_sweep.h"
#include "calibrate/fake_backend.h"
#include "hardware/cost_model.h"

namespace zplan::calibrate {
namespace {

using hardware::Collective;

std::vector<Sample> line(double alpha, double beta, double min_bytes, double max_bytes) {
  std::vector<Sample> s;
  for (double b : geometric_sizes(min_bytes, max_bytes, 2)) s.push_back({b, alpha + beta * b});
  return s;
}

// The fake's sweep of one op, timed and averaged like a real backend's (quick sweep, 8 ranks).
CollectiveMeasurement fake_sweep(const FakeSpec& spec, Collective op) {
  FakeCollectiveBench bench(spec, 0);
  auto group = kernels::make_single_process_comm();
  Progress quiet(nullptr);
  return sweep_collective(bench, *group, op, sweep_settings(ProbeOptions{}, true), quiet);
}

TEST_CASE("weighted least squares returns alpha and beta of exact data", "[calibrate][fit]") {
  // t = 20 us + S / (10 GB/s) from 8 B to 64 MiB: every point on the line, so the fit is exact.
  std::vector<Sample> s = line(20e-6, 1e-10, 8, 64 * kMiB);
  AlphaBeta f = fit_alpha_beta(s, 0, s.size());
  CHECK(f.alpha_s == Approx(20e-6).epsilon(1e-9));
  CHECK(f.beta_s_per_byte == Approx(1e-10).epsilon(1e-9));
  CHECK(weighted_error(s, 0, s.size(), f) == Approx(0).margin(1e-18));
}

TEST_CASE("weighting by 1/t^2 keeps the latency that ordinary least squares loses",
          "[calibrate][fit]") {
  // Reference §7.5: with sizes spanning 10^7, ordinary least squares is ruled by the largest
  // points. Perturb the largest point by +1 %: relative-error weights move alpha by ~nothing
  // (each point counts by its relative error), while an unweighted fit would shift alpha by
  // ~1 % of the largest time (67 us here, far more than alpha itself).
  std::vector<Sample> s = line(20e-6, 1e-10, 8, 64 * kMiB);
  s.back().seconds *= 1.01;
  AlphaBeta f = fit_alpha_beta(s, 0, s.size());
  CHECK(f.alpha_s == Approx(20e-6).epsilon(0.01));
}

TEST_CASE("fits respect alpha >= 0 and a positive beta", "[calibrate][fit]") {
  SECTION("bandwidth-bound data pass through the origin") {
    // t = S / 5 GB/s - 0.1 us would need a negative alpha.
    std::vector<Sample> s = line(-1e-7, 2e-10, 1 * kMiB, 64 * kMiB);
    AlphaBeta f = fit_alpha_beta(s, 0, s.size());
    CHECK(f.alpha_s == 0);
    CHECK(f.beta_s_per_byte == Approx(2e-10).epsilon(0.01));
  }
  SECTION("flat data get the smallest beta and their mean time") {
    std::vector<Sample> s = {{8, 5e-6}, {16, 5e-6}, {32, 5e-6}, {64, 4.9e-6}};
    AlphaBeta f = fit_alpha_beta(s, 0, s.size());
    CHECK(f.beta_s_per_byte == kMinBetaSPerByte);
    CHECK(f.alpha_s == Approx(4.97e-6).epsilon(0.01));
  }
  SECTION("one sample is all latency") {
    std::vector<Sample> s = {{1024, 3e-6}};
    AlphaBeta f = fit_alpha_beta(s, 0, 1);
    CHECK(f.alpha_s == Approx(3e-6).epsilon(1e-6));
    CHECK(f.beta_s_per_byte == kMinBetaSPerByte);
  }
}

TEST_CASE("a straight line is one regime", "[calibrate][fit]") {
  RegimeFit f = fit_regimes(line(20e-6, 1e-10, 8, 64 * kMiB));
  REQUIRE(f.regimes.size() == 1);
  CHECK(f.regimes[0].max_bytes == 64 * kMiB);
  CHECK(f.max_rel_error < 1e-9);
}

TEST_CASE("a protocol switch is found where it is", "[calibrate][fit]") {
  // LL-like up to 64 KiB (5 us, 20 GB/s), Simple-like above (40 us, 150 GB/s), and a third
  // regime beyond 16 MiB (NVLS-like, 60 us, 250 GB/s): three regimes with those breakpoints.
  std::vector<Sample> s = line(5e-6, 1 / 20e9, 8, 64 * kKiB);
  for (const Sample& x : line(40e-6, 1 / 150e9, 128 * kKiB, 16 * kMiB)) s.push_back(x);
  for (const Sample& x : line(60e-6, 1 / 250e9, 32 * kMiB, 1024 * kMiB)) s.push_back(x);
  RegimeFit f = fit_regimes(s);
  REQUIRE(f.regimes.size() == 3);
  CHECK(f.regimes[0].max_bytes == 64 * kKiB);
  CHECK(f.regimes[1].max_bytes == 16 * kMiB);
  CHECK(f.regimes[0].alpha_s == Approx(5e-6).epsilon(1e-6));
  CHECK(1 / f.regimes[1].beta_s_per_byte == Approx(150e9).epsilon(1e-6));
  CHECK(1 / f.regimes[2].beta_s_per_byte == Approx(250e9).epsilon(1e-6));
  CHECK(f.max_rel_error < 1e-6);
  SECTION("at most max_regimes") {
    FitSettings one;
    one.max_regimes = 1;
    CHECK(fit_regimes(s, one).regimes.size() == 1);
  }
}

TEST_CASE("relative errors: max and median", "[calibrate][fit]") {
  // Errors 10 %, 0 %, 20 %, 5 %: max 20 %, median (5 + 10) / 2 = 7.5 %.
  FitError e = relative_errors({1.1, 2, 2.4, 4.2}, {1, 2, 2, 4});
  CHECK(e.max_rel == Approx(0.2));
  CHECK(e.median_rel == Approx(0.075));
}

TEST_CASE("the fake backend's alpha and beta come back within 2 %", "[calibrate][fit]") {
  // The fake times every block as model x (1 + 1 % noise); the quick sweep (8 B - 64 MiB, median
  // of 3 blocks) and the weighted fit must recover the model, for several noise seeds.
  const uint64_t seed = GENERATE(range(uint64_t{1}, uint64_t{21}));
  FakeSpec spec = default_fake_spec();
  spec.seed = seed;
  INFO("seed " << seed);
  SECTION("all_gather: one regime, 10 us and 200 GB/s") {
    RegimeFit f = fit_regimes(samples_of(fake_sweep(spec, Collective::kAllGather)));
    REQUIRE(!f.regimes.empty());
    CHECK(f.regimes.front().alpha_s == Approx(10e-6).epsilon(0.02));
    CHECK(f.regimes.back().beta_s_per_byte == Approx(1 / 200e9).epsilon(0.02));
    CHECK(f.median_rel_error < 0.02);
  }
  SECTION("reduce_scatter: 12 us and 190 GB/s") {
    RegimeFit f = fit_regimes(samples_of(fake_sweep(spec, Collective::kReduceScatter)));
    CHECK(f.regimes.front().alpha_s == Approx(12e-6).epsilon(0.02));
    CHECK(f.regimes.back().beta_s_per_byte == Approx(1 / 190e9).epsilon(0.02));
  }
  SECTION("all_reduce: two regimes split at 512 KiB") {
    RegimeFit f = fit_regimes(samples_of(fake_sweep(spec, Collective::kAllReduce)));
    REQUIRE(f.regimes.size() == 2);
    CHECK(f.regimes[0].max_bytes == 512 * kKiB);
    CHECK(f.regimes[0].alpha_s == Approx(5e-6).epsilon(0.02));
    CHECK(f.regimes[0].beta_s_per_byte == Approx(1 / 20e9).epsilon(0.02));
    CHECK(f.regimes[1].alpha_s == Approx(60e-6).epsilon(0.02));
    CHECK(f.regimes[1].beta_s_per_byte == Approx(1 / 130e9).epsilon(0.02));
    CHECK(f.max_rel_error < 0.05);
  }
}

TEST_CASE("noise alone does not split a regime", "[calibrate][fit]") {
  // One true regime with the fake's 1 % noise: the information criterion (with its doubled
  // penalty for breakpoints chosen from the data) must not buy extra regimes. (With the plain
  // penalty 11 of 200 seeds split; with the doubled one none of 200, at 1 % or 2 % noise.)
  int splits = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    FakeSpec spec = default_fake_spec();
    spec.seed = seed;
    splits += fit_regimes(samples_of(fake_sweep(spec, Collective::kAllGather))).regimes.size() > 1;
  }
  CHECK(splits == 0);
}

TEST_CASE("the GEMM curve reproduces the measured times through gemm_time_s", "[calibrate][fit]") {
  // Three shapes of distinct FLOPs, 1 us call overhead: t = 1 us + F / (100 GFLOP/s x e) with
  // e = 0.25, 0.5, 1. The best rate sets the peak (100 GFLOP/s), so the efficiencies come back,
  // and a profile with this curve gives back each measured time (to 0.1 %: the curve's F are
  // rounded to 3 significant digits).
  std::vector<GemmRow> rows;
  const double peak = 100e9, call = 1e-6;
  const GemmShape shapes[] = {{64, 64, 64}, {256, 256, 256}, {1024, 1024, 1024}};
  const double eff[] = {0.25, 0.5, 1.0};
  for (int i = 0; i < 3; ++i) {
    GemmRow r;
    r.dtype = "fp32";
    r.m = shapes[i].m;
    r.n = shapes[i].n;
    r.k = shapes[i].k;
    r.time_s = call + r.flops() / (peak * eff[i]);
    rows.push_back(r);
  }
  GemmCurve c = fit_gemm_curve(rows, 0, call);
  CHECK(c.peak_flops_per_s == Approx(peak));
  REQUIRE(c.points.size() == 3);
  hardware::GpuSpec gpu;
  gpu.arch = hardware::Arch::kCpu;
  gpu.peak_flops_per_s = gpu.peak_fp32_flops_per_s = c.peak_flops_per_s;
  gpu.gemm_efficiency = c.points;
  gpu.hbm_bw_bytes_per_s = 1e15;
  gpu.hbm_efficiency = 1;
  gpu.kernel_launch_s = call;
  for (int i = 0; i < 3; ++i) {
    CHECK(c.points[i].efficiency == Approx(eff[i]));
    CHECK(hardware::gemm_time_s(gpu, double(rows[i].m), double(rows[i].n), double(rows[i].k), 4) ==
          Approx(rows[i].time_s).epsilon(1e-3));
  }
  SECTION("shapes of (nearly) equal FLOPs merge into one point") {
    GemmRow twin = rows[1];
    std::swap(twin.n, twin.k);  // same FLOPs
    twin.time_s = call + twin.flops() / (peak * 0.3);
    rows.push_back(twin);
    GemmCurve merged = fit_gemm_curve(rows, 0, call);
    REQUIRE(merged.points.size() == 3);
    CHECK(merged.points[1].efficiency == Approx((0.5 + 0.3) / 2));
  }
  SECTION("a given peak caps efficiencies at 1") {
    GemmCurve capped = fit_gemm_curve(rows, peak / 2, call);
    CHECK(capped.points.back().efficiency == 1.0);
    CHECK(capped.points.front().efficiency == Approx(0.5));
  }
}

}  // namespace
}  // namespace zplan::calibrate
