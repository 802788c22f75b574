// Measurements: what the backends measured, before fitting. SI units throughout (bytes, seconds,
// bytes/s, FLOP/s, parameters/s); the names say which. Rank 0 holds the combined view of all
// ranks: per-rank rates are the mean over ranks measured at the same time, node rates the sum over
// a node's ranks.
#ifndef ZPLAN_CALIBRATE_MEASUREMENTS_H_
#define ZPLAN_CALIBRATE_MEASUREMENTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hardware/profile.h"

namespace zplan::calibrate {

// One line of a collective table, as nccl-tests prints it (reference/nccl_hardware.md §2.1).
struct CollectiveRow {
  double bytes = 0;   // nccl-tests' size S: total buffer for all_gather/reduce_scatter,
                      // per-rank buffer for all_reduce
  int64_t count = 0;  // elements per rank (nccl-tests' count column)
  // One operation, in place (nccl-tests' second group of columns; what zplan's executor and
  // DeepSpeed's in-place buckets run): mean over ranks, median over repeated timed blocks. The
  // profile's table holds these.
  double time_s = 0;
  double algbw_bytes_per_s = 0;  // S / t
  double busbw_bytes_per_s = 0;  // algbw x nccl-tests' bus factor
  double oop_time_s = 0;         // the same, out of place (nccl-tests' first group)
  // Standard error of time_s relative to it, from the spread of the in-place blocks (1.2533 sd /
  // sqrt(blocks) for a median); 0 with a single block.
  double rel_error = 0;
  int iters = 0;  // operations per timed block
};

struct CollectiveMeasurement {
  std::string backend;  // "mpi", "nccl", "fake"
  hardware::Collective op = hardware::Collective::kAllReduce;
  int ranks = 0;
  int nodes = 1;
  std::string type = "float";
  std::string redop = "sum";        // "none" for all_gather, as nccl-tests prints it
  std::vector<CollectiveRow> rows;  // by increasing bytes
};

// A throughput measurement (the host and device tables of the report).
struct RateRow {
  std::string probe;     // e.g. "copy h2d pinned", "adam", "nvme write", "triad"
  double size = 0;       // bytes, or parameters for Adam
  int threads = 1;       // threads per rank
  double time_s = 0;     // one operation on one rank: median over repeats, mean over ranks
  double rate = 0;       // per rank: size / time_s (bytes/s or params/s)
  double node_rate = 0;  // all ranks of a node at once: the sum of their rates
};

// The shape of one GEMM C[m x n] = op(A)[m x k] * op(B)[k x n], op = transpose when the flag is
// set (row-major storage).
struct GemmShape {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  bool trans_a = false;
  bool trans_b = false;
  // "NN", "NT", "TN", "TT" as BLAS names op(A) op(B).
  std::string ops() const { return std::string(trans_a ? "T" : "N") + (trans_b ? "T" : "N"); }
};

// The GEMMs of a linear layer y = x W^T (x: tokens x in, W: out x in, PyTorch's layout) in one
// training step, as zplan's executor runs them: forward y = x W^T (NT: m = tokens, n = out,
// k = in), input gradient dx = dy W (NN: m = tokens, n = in, k = out), weight gradient
// dW = dy^T x (TN: m = out, n = in, k = tokens).
std::vector<GemmShape> linear_layer_gemms(int64_t tokens, int64_t in, int64_t out);

// One GEMM of the sweep.
struct GemmRow {
  std::string dtype;  // "fp32" (BLAS sgemm), "bf16", "fp16" (cuBLAS)
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  bool trans_a = false;
  bool trans_b = false;
  double time_s = 0;  // median over repeats, mean over ranks
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
  double flops_per_s() const { return time_s > 0 ? flops() / time_s : 0; }

  static GemmRow of(std::string dtype, const GemmShape& s, double time_s) {
    GemmRow r;
    r.dtype = std::move(dtype);
    r.m = s.m;
    r.n = s.n;
    r.k = s.k;
    r.trans_a = s.trans_a;
    r.trans_b = s.trans_b;
    r.time_s = time_s;
    return r;
  }
};

// The host backend: the CPU as the compute device of a CPU-only run, and the host side of a GPU
// node (copies, CPU Adam, NVMe). All ranks of a node measure at the same time, as the ranks of a
// training run (or zplan's reference executor) work at the same time.
struct HostMeasurements {
  bool measured = false;
  std::string cpu_model;  // /proc/cpuinfo "model name"
  hardware::CpuVendor cpu_vendor = hardware::CpuVendor::kOther;
  int cpu_cores = 0;        // online CPUs of the node
  double memory_bytes = 0;  // physical memory of the node
  int ranks_per_node = 1;
  int threads_per_rank = 1;
  // memcpy between buffers standing for device and host memory, per rank, caches flushed before
  // each copy; "pinned" buffers are mlock'ed and pre-faulted, "pageable" ones plain malloc'ed and
  // pre-faulted (reference §7.2, bandwidthTest).
  double h2d_pinned_bytes_per_s = 0;
  double d2h_pinned_bytes_per_s = 0;
  double h2d_pageable_bytes_per_s = 0;
  double d2h_pageable_bytes_per_s = 0;
  std::string pinned_note;  // "mlock" or why it fell back
  // STREAM triad, counted as STREAM counts (3 arrays x 4 bytes per element; the CPU also reads
  // the destination before writing it, which STREAM does not count).
  double triad_bytes_per_s_per_rank = 0;
  double triad_bytes_per_s_node = 0;
  // The memory-bound kernel of zplan's executor: x = s x in place, read + write = 8 bytes per
  // element counted, which is also what the CPU moves.
  double inplace_bytes_per_s_per_rank = 0;
  double inplace_bytes_per_s_node = 0;
  // zplan's vectorized fp32 Adam (kernels/cpu_adam.h) at the largest size, threads_per_rank
  // threads per rank.
  double adam_params_per_s_per_rank = 0;
  std::string adam_isa;  // "avx512", "avx2", "scalar"
  // O_DIRECT sequential write then read of one file per rank at nvme_path.
  double nvme_write_bytes_per_s_node = 0;
  double nvme_read_bytes_per_s_node = 0;
  double nvme_capacity_bytes = 0;  // free space at nvme_path
  std::string nvme_path;
  std::string nvme_engine;  // "io_uring", "pread/pwrite", with a note when it fell back
  bool nvme_o_direct = false;
  // fp32 GEMM sweep with threads_per_rank BLAS threads per rank.
  std::vector<GemmRow> gemms;
  double gemm_call_s = 0;  // a 1x1x1 sgemm: the per-call overhead
  std::string gemm_library;
  std::vector<RateRow> rates;  // every host measurement, for the report
};

// The cuda backend: one GPU per rank (all ranks of a node at once).
struct DeviceMeasurements {
  bool measured = false;
  std::string name;  // cudaDeviceProp::name
  int cc_major = 0;
  int cc_minor = 0;
  int devices_per_node = 0;
  double memory_bytes = 0;
  double h2d_pinned_bytes_per_s = 0;
  double d2h_pinned_bytes_per_s = 0;
  double h2d_pageable_bytes_per_s = 0;
  double d2h_pageable_bytes_per_s = 0;
  double d2d_bytes_per_s = 0;  // counted as bandwidthTest counts: read + write = 2 x size
  std::vector<GemmRow> gemms;  // bf16 and fp16 cuBLAS
  std::vector<RateRow> rates;
};

struct Measurements {
  std::vector<std::string> backends;  // in the order they ran
  HostMeasurements host;
  DeviceMeasurements device;
  std::vector<CollectiveMeasurement> collectives;
  nlohmann::json versions = nlohmann::json::object();  // library -> version string
  std::vector<std::string> notes;  // fall-backs and warnings, also written to provenance
};

}  // namespace zplan::calibrate

#endif  // ZPLAN_CALIBRATE_MEASUREMENTS_H_
