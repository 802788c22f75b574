#include "calibrate/fake_backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "base/units.h"
#include "calibrate/collective_sweep.h"
#include "calibrate/host_backend.h"

namespace zplan::calibrate {

namespace {

constexpr double kPi = 3.14159265358979323846;

// SplitMix64 (Steele, Lea & Flood 2014): fully specified, unlike std::normal_distribution.
uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double uniform01(uint64_t* state) {  // in (0, 1]
  return (double(splitmix64(state) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

void sleep_for(double s) {
  if (s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

class FakeBackend : public Backend {
 public:
  explicit FakeBackend(const FakeSpec& spec) : spec_(spec) {}
  std::string name() const override { return "fake"; }
  void check(kernels::Comm&, const ProbeOptions&) override {}
  void measure(kernels::Comm& g, const ProbeOptions& o, Progress& progress,
               Measurements* out) override;

 private:
  FakeSpec spec_;
};

void FakeBackend::measure(kernels::Comm& g, const ProbeOptions& o, Progress& progress,
                          Measurements* out) {
  FakeCollectiveBench bench(spec_, o.fake_delay_s);
  // Host: fixed numbers for a made-up node, scaled by the same noise stream.
  HostMeasurements& h = out->host;
  h.measured = true;
  h.cpu_model = "zplan fake CPU";
  h.cpu_vendor = hardware::CpuVendor::kOther;
  h.cpu_cores = spec_.cpu_cores;
  h.memory_bytes = spec_.memory_bytes;
  h.ranks_per_node = spec_.ranks / spec_.nodes;
  h.threads_per_rank = threads_per_rank(o, spec_.cpu_cores, h.ranks_per_node, spec_.cpu_cores);
  h.h2d_pinned_bytes_per_s = h.d2h_pinned_bytes_per_s = spec_.copy_bytes_per_s;
  h.h2d_pageable_bytes_per_s = h.d2h_pageable_bytes_per_s = spec_.copy_bytes_per_s;
  h.pinned_note = "mlock";
  h.triad_bytes_per_s_per_rank = spec_.triad_bytes_per_s;
  h.triad_bytes_per_s_node = spec_.triad_bytes_per_s * h.ranks_per_node;
  h.inplace_bytes_per_s_per_rank = spec_.triad_bytes_per_s;
  h.inplace_bytes_per_s_node = spec_.triad_bytes_per_s * h.ranks_per_node;
  h.adam_params_per_s_per_rank = spec_.adam_params_per_s;
  h.adam_isa = "fake";
  h.nvme_read_bytes_per_s_node = spec_.nvme_read_bytes_per_s;
  h.nvme_write_bytes_per_s_node = spec_.nvme_write_bytes_per_s;
  h.nvme_capacity_bytes = 1e12;
  h.nvme_path = o.nvme_path;
  h.nvme_engine = "fake";
  h.nvme_o_direct = true;
  h.gemm_library = "fake";
  h.gemm_call_s = spec_.gemm_call_s;
  const HostSizes sizes = host_sizes(o.sweep);
  auto add = [&](const char* probe, double size, double rate) {
    RateRow r;
    r.probe = probe;
    r.size = size;
    r.threads = h.threads_per_rank;
    r.rate = rate;
    r.time_s = size / rate;
    r.node_rate = rate * h.ranks_per_node;
    h.rates.push_back(r);
  };
  add("copy h2d pinned", sizes.copy_bytes, h.h2d_pinned_bytes_per_s);
  add("copy d2h pinned", sizes.copy_bytes, h.d2h_pinned_bytes_per_s);
  add("copy h2d pageable", sizes.copy_bytes, h.h2d_pageable_bytes_per_s);
  add("copy d2h pageable", sizes.copy_bytes, h.d2h_pageable_bytes_per_s);
  add("triad", 3 * sizes.triad_bytes_per_array, h.triad_bytes_per_s_per_rank);
  add("scale in place", 2 * sizes.triad_bytes_per_array, h.inplace_bytes_per_s_per_rank);
  for (double p : sizes.adam_params) add("adam", p, h.adam_params_per_s_per_rank);
  for (const GemmShape& s : sizes.gemms) {
    GemmRow r = GemmRow::of("fp32", s, 0);
    const double f = r.flops();
    const double eff = f / (f + spec_.gemm_half_flops);
    r.time_s = (spec_.gemm_call_s + f / (spec_.gemm_peak_flops_per_s * eff)) *
               std::max(0.5, 1 + spec_.noise * bench.normal());
    h.gemms.push_back(r);
  }
  sleep_for(o.fake_delay_s);
  progress.note("fake: host numbers");

  const SweepSettings settings = sweep_settings(o, /*gpu=*/true);
  for (const FakeCollective& c : spec_.collectives) {
    out->collectives.push_back(sweep_collective(bench, g, c.op, settings, progress));
  }
  out->versions["fake"] = "seed " + std::to_string(spec_.seed);
}

}  // namespace

double FakeCollective::at(double bytes) const {
  for (const auto& g : regimes) {
    if (bytes <= g.max_bytes) return g.alpha_s + g.beta_s_per_byte * bytes;
  }
  return regimes.back().alpha_s + regimes.back().beta_s_per_byte * bytes;
}

FakeSpec default_fake_spec() {
  using hardware::Collective;
  FakeSpec s;
  s.collectives = {
      {Collective::kAllGather, {{1e18, 10e-6, 1 / 200e9}}},
      {Collective::kReduceScatter, {{1e18, 12e-6, 1 / 190e9}}},
      {Collective::kAllReduce, {{512 * kKiB, 5e-6, 1 / 20e9}, {1e18, 60e-6, 1 / 130e9}}},
  };
  return s;
}

FakeCollectiveBench::FakeCollectiveBench(const FakeSpec& spec, double delay_s)
    : spec_(spec), delay_s_(delay_s), state_(spec.seed) {}

double FakeCollectiveBench::normal() {
  // Box-Muller; one of the pair is enough.
  double u1 = uniform01(&state_);
  double u2 = uniform01(&state_);
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * kPi * u2);
}

double FakeCollectiveBench::run(hardware::Collective op, int64_t count, int iters, bool) {
  sleep_for(delay_s_);
  const double bytes =
      op == hardware::Collective::kAllReduce ? double(count) * 4 : double(count) * 4 * spec_.ranks;
  double t = 0;
  for (const FakeCollective& c : spec_.collectives) {
    if (c.op == op) t = c.at(bytes);
  }
  return iters * t * std::max(0.5, 1 + spec_.noise * normal());
}

std::unique_ptr<Backend> make_fake_backend(const FakeSpec& spec) {
  return std::make_unique<FakeBackend>(spec);
}

}  // namespace zplan::calibrate
