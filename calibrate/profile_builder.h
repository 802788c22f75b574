// From measurements to a hardware profile (docs/formats.md, docs/calibration.md "The profile").
//
// Start from a base -- a profile given with --base (stock name or file), or, for a CPU-only
// calibration, one built from the host measurements: arch "cpu", intra_link "shm", one "device"
// per rank with the rank's share of the node's cores and memory -- and replace what was
// measured:
// * host: CPU vendor, cores, host memory and its bandwidth, the CPU Adam rate, NVMe rates and free
//   space; on a cpu device also the device itself (fp32 peak and GEMM curve from the sgemm sweep,
//   the memory-kernel bandwidth, the call overhead) and its "host copies" (memcpy);
// * cuda: device name, architecture, memory, GEMM efficiency curve (bf16, against the base's peak),
//   HBM efficiency (device-to-device copies against the base's HBM peak), host<->device copies;
// * mpi / nccl: one measured table per (op, ranks, nodes) with its alpha-beta regimes -- the
//   simulator prefers these over every formula (hardware::collective_cost) -- and, from a full
//   single-node all_reduce, the node's bus bandwidth (and, on "shm" nodes, its per-step latency).
// Every replaced number gets a `sources` entry saying how it was measured; numbers a built CPU
// base has to estimate say "[est]" and why.
#ifndef ZPLAN_CALIBRATE_PROFILE_BUILDER_H_
#define ZPLAN_CALIBRATE_PROFILE_BUILDER_H_

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/fit.h"
#include "calibrate/measurements.h"
#include "hardware/profile.h"

namespace zplan::calibrate {

struct BuildInputs {
  const Measurements* measurements = nullptr;
  std::optional<hardware::Profile> base;  // nullopt: build a CPU base from the host measurements
  std::string base_label;                 // for provenance, e.g. "a100 (stock)"
  std::string name;                       // the profile's name
  int nodes = 1;                          // nodes of the run
  double process_bytes = 0;               // resident memory of one zplan rank (runtime estimate)
  nlohmann::json provenance = nlohmann::json::object();  // date, command, hosts... (the driver's)
};

struct BuildResult {
  hardware::Profile profile;
  std::vector<RegimeFit> collective_fits;  // parallel to measurements->collectives
  GemmCurve gemm_curve;
  std::string gemm_dtype;  // "fp32" (host) or "bf16" (cuda); "" without GEMMs
  FitError gemm_error;     // of hardware::gemm_time_s on the finished profile vs the sweep
  std::vector<std::string> measured;  // JSON pointers of the numbers replaced
  std::vector<std::string> notes;
};

// Throws InputError when there is no base and no host measurements to build one from, or when
// the result does not pass hardware::profile_from_json (a measurement out of range).
BuildResult build_profile(const BuildInputs& inputs);

// The CPU base alone (before the collectives): exposed for tests.
hardware::Profile cpu_base_profile(const HostMeasurements& host, int nodes, double process_bytes,
                                   const GemmCurve& curve, nlohmann::json* sources);

}  // namespace zplan::calibrate

#endif  // ZPLAN_CALIBRATE_PROFILE_BUILDER_H_
