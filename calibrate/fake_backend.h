// The fake backend: deterministic measurements with seeded noise, for tests and for trying
// `zplan calibrate` anywhere (`--backend fake`).
//
// Its collectives follow a known alpha-beta model per size regime; each timed block is multiplied
// by (1 + noise * z), z a standard normal drawn from a seeded SplitMix64 stream (Box-Muller), so
// every run gives the same numbers on every platform. They go through the same sweep, timing
// and fit as the MPI and NCCL backends (calibrate/collective_sweep.h), which is what lets the fit
// tests check that a known alpha and beta come back. Its host numbers (a made-up 16-core node)
// and GEMM times (peak x F / (F + F_half)) are fixed, so that a profile can be built from a fake
// run alone.
#ifndef ZPLAN_CALIBRATE_FAKE_BACKEND_H_
#define ZPLAN_CALIBRATE_FAKE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "calibrate/backend.h"

namespace zplan::calibrate {

struct FakeCollective {
  hardware::Collective op = hardware::Collective::kAllReduce;
  // t = alpha + beta S in the first regime whose max_bytes >= S (the last one beyond).
  std::vector<hardware::CollectiveTable::Regime> regimes;
  double at(double bytes) const;
};

struct FakeSpec {
  int ranks = 8;
  int nodes = 1;
  std::vector<FakeCollective> collectives;  // the ops measured, in this order
  double noise = 0.01;                      // relative standard deviation of one timed block
  uint64_t seed = 42;
  // The fake node (per rank unless noted).
  int cpu_cores = 16;
  double memory_bytes = 64.0 * 1024 * 1024 * 1024;
  double copy_bytes_per_s = 10e9;
  double triad_bytes_per_s = 8e9;  // also the in-place kernel's rate
  double adam_params_per_s = 250e6;
  double nvme_read_bytes_per_s = 3e9;  // node
  double nvme_write_bytes_per_s = 1.5e9;
  double gemm_peak_flops_per_s = 100e9;
  double gemm_half_flops = 5e6;  // efficiency F / (F + F_half)
  double gemm_call_s = 1e-6;
  double process_bytes = 160.0 * 1024 * 1024;  // a rank's resident memory before it allocates
};

// 8 ranks on one node: all_reduce with an LL-like regime up to 512 KiB (alpha 5 us, 20 GB/s)
// and a Simple-like one above (60 us, 130 GB/s); all_gather (10 us, 200 GB/s) and reduce_scatter
// (12 us, 190 GB/s) one regime each. Each regime spans sizes where its alpha dominates and sizes
// where its beta does, so that both can be recovered from the sweep.
FakeSpec default_fake_spec();

// A CollectiveBench whose "wall-clock" times are the spec's model times, with noise.
class FakeCollectiveBench : public CollectiveBench {
 public:
  FakeCollectiveBench(const FakeSpec& spec, double delay_s);
  int ranks() const override { return spec_.ranks; }
  int nodes() const override { return spec_.nodes; }
  std::string backend() const override { return "fake"; }
  void reserve(double) override {}
  double run(hardware::Collective op, int64_t count, int iters, bool in_place) override;
  // Standard normal numbers from the seeded stream.
  double normal();

 private:
  FakeSpec spec_;
  double delay_s_;
  uint64_t state_;
};

std::unique_ptr<Backend> make_fake_backend(const FakeSpec& spec = default_fake_spec());

}  // namespace zplan::calibrate

#endif  // ZPLAN_CALIBRATE_FAKE_BACKEND_H_
