// The host backend: the machine's CPUs and disks, as a training run's ranks use them.
//
// What it measures, on every rank of a node at the same time (ranks of a training run, and of
// zplan's reference executor, work at the same time and share cores, caches and DRAM):
// * host copies: memcpy of HostSizes::copy_bytes between a rank's "device" buffer and a host
//   buffer, pinned (mlock'ed) and pageable (plain malloc), both pre-faulted, with the caches
//   flushed before each copy (bandwidthTest's method, reference/nccl_hardware.md §7.2);
// * memory bandwidth: the executor's memory-bound kernel x = s x in place (8 bytes per element)
//   and STREAM triad a = b + s c (counted as STREAM counts, 12 bytes per element) with the rank's
//   threads, caches flushed before each run;
// * CPU Adam: zplan's vectorized fp32 Adam (kernels/cpu_adam.h) with the rank's threads at a few
//   sizes (parameters per rank), caches flushed before each step (reference §6);
// * NVMe: O_DIRECT sequential write then read of one scratch file per rank at --nvme-path with
//   DeepSpeed's aio defaults, 1 MiB blocks, queue depth 8, through io_uring (block_io.h);
// * GEMMs: fp32 sgemm (kernels/cpu_gemm.h: BLAS) over the three training GEMMs of MLP and
//   transformer linear layers, in the layouts the executor uses (forward NT, input gradient NN,
//   weight gradient TN), with the rank's threads: the peak FP32 rate and the efficiency curve
//   (reference §7.3).
// Every time is a median over repeats on each rank, then a mean over ranks.
#ifndef ZPLAN_CALIBRATE_HOST_BACKEND_H_
#define ZPLAN_CALIBRATE_HOST_BACKEND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "calibrate/backend.h"

namespace zplan::calibrate {

// The node as the operating system describes it.
struct CpuInfo {
  std::string model;  // /proc/cpuinfo "model name"
  hardware::CpuVendor vendor = hardware::CpuVendor::kOther;
  int online_cpus = 1;
  double memory_bytes = 0;
  double l3_bytes = 0;  // 0 when unknown
};
CpuInfo read_cpu_info();

// The host probes' sizes for a sweep (documented in docs/calibration.md).
struct HostSizes {
  double copy_bytes = 0;
  double triad_bytes_per_array = 0;
  std::vector<double> adam_params;  // per rank; the largest gives the profile's rate
  double nvme_bytes_per_rank = 0;
  // Linear layers (tokens, in, out) whose three training GEMMs (linear_layer_gemms) are timed.
  struct Layer {
    int64_t tokens, in, out;
  };
  std::vector<Layer> layers;
  std::vector<GemmShape> gemms;  // of `layers`, in order
  int repeats = 3;
  double target_block_s = 0.02;  // GEMM timing blocks
};
HostSizes host_sizes(Sweep sweep);

}  // namespace zplan::calibrate

#endif  // ZPLAN_CALIBRATE_HOST_BACKEND_H_
