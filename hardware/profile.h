// Profile: one node type and its network, as zplan's cost model sees it.
//
// A profile is a JSON file (docs/formats.md): stock ones ship in hardware/*.json (v100,
// a100-40g, a100, h100, h200, a100-pcie, h100-pcie, l4, a10g, l40s, rtx4090), every number with
// its source; `zplan calibrate` writes measured
// ones with provenance. Inside zplan every quantity is in SI base units and the member name says
// which (bytes, seconds, bytes_per_s, flops_per_s); the JSON uses the units people quote (GiB,
// GB/s = 1e9 B/s as NCCL does, TFLOP/s, microseconds), and the loader converts once.
// Measured tables, when present, win over the formulas (hardware/cost_model.h).
#ifndef ZPLAN_HARDWARE_PROFILE_H_
#define ZPLAN_HARDWARE_PROFILE_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hardware/framework.h"

namespace zplan::hardware {

// The slowest bandwidth a profile holds, 1 MB/s (docs/formats.md, "Ranges"): slower ones would put
// a large step's durations past the simulator's int64-nanosecond clock.
inline constexpr double kMinBandwidthBytesPerS = 1e6;

// Picks NCCL's per-architecture bandwidth caps (reference/nccl_hardware.md §1.2). kCpu is a
// host-only "device": CPU ranks talking over MPI, as on the machines without GPUs.
enum class Arch { kVolta, kAmpere, kHopper, kBlackwell, kCpu };

// flash-attn 2 runs on Ampere and newer GPUs only (its README: "Ampere, Ada, or Hopper GPUs").
inline bool runs_flash_attn_2(Arch arch) { return arch != Arch::kVolta && arch != Arch::kCpu; }

// How the devices of one node talk to each other.
enum class IntraLink { kNvlink, kPcie, kSharedMemory };

// The host CPU's vendor: NCCL's multi-node LL bandwidth cap and its network overhead depend on it
// (reference/nccl_hardware.md §1.2). kOther behaves as NCCL treats non-AMD hosts.
enum class CpuVendor { kIntel, kAmd, kOther };

// Fraction of peak FLOP/s that one GEMM of `flops` floating-point operations reaches.
struct GemmEfficiencyPoint {
  double flops = 0;
  double efficiency = 0;
};

struct GpuSpec {
  std::string name;
  Arch arch = Arch::kAmpere;
  double memory_bytes = 0;
  double peak_flops_per_s = 0;       // dense fp16/bf16 tensor-core rate
  double peak_fp32_flops_per_s = 0;  // dense fp32 (non-tensor-core) rate
  double hbm_bw_bytes_per_s = 0;
  double hbm_efficiency = 0;  // fraction of hbm_bw reached by memory-bound kernels, in (0, 1]
  // Sorted by flops; interpolated linearly in log(flops), clamped at both ends.
  std::vector<GemmEfficiencyPoint> gemm_efficiency;
  // Fraction of peak that fused (flash) attention kernels reach at training sequence lengths.
  double attention_efficiency = 0;
  // The same for FlashAttention-3 (flash_attention_3, Hopper only), which the profile may rate
  // apart; 0 = not given: FlashAttention-3 runs at attention_efficiency.
  double flash3_attention_efficiency = 0;
  // Fraction of compute throughput lost while a collective kernel runs beside it: NCCL's
  // kernels occupy one SM per channel and share HBM bandwidth with the GEMMs they overlap.
  // 1 means no overlap at all (CPU ranks whose collectives run on the same cores).
  double comm_compute_slowdown = 0;
  // Fraction of the kernels' roofline a real PyTorch + DeepSpeed step sustains on the compute
  // stream (launch gaps, Python hooks, allocator, imperfect shapes); 1 = kernels back to back.
  double framework_efficiency = 1;
  double kernel_launch_s = 0;  // fixed cost per compute op
};

struct NodeSpec {
  int gpus_per_node = 0;
  IntraLink intra_link = IntraLink::kNvlink;
  // NCCL's effective ring bus bandwidth inside one node (nccl-tests busbw at large sizes).
  double intra_busbw_bytes_per_s = 0;
  // NVLink SHARP (NVLS) all_reduce bus bandwidth of a full node; 0 when the node has none.
  double nvls_busbw_bytes_per_s = 0;
  // Per-step latency of the plain alpha-beta ring used for kSharedMemory nodes (CPU ranks over
  // MPI); 0 and unused on NVLink / PCIe nodes, where NCCL's per-hop latencies apply.
  double intra_latency_s = 0;
  // Host <-> device copies of one GPU alone, pinned and pageable host memory.
  double h2d_pinned_bytes_per_s = 0;
  double d2h_pinned_bytes_per_s = 0;
  double h2d_pageable_bytes_per_s = 0;
  double d2h_pageable_bytes_per_s = 0;
  // GPUs behind one PCIe switch share its uplink to the CPU (DGX A100: 2 GPUs per switch).
  int gpus_per_pcie_switch = 1;
  double pcie_uplink_bytes_per_s = 0;
  CpuVendor cpu_vendor = CpuVendor::kIntel;
  int cpu_cores = 0;
  double host_memory_bytes = 0;
  double host_memory_bw_bytes_per_s = 0;  // achievable DRAM bandwidth of the whole node
  double cpu_adam_params_per_s_per_core = 0;  // DeepSpeedCPUAdam-like fp32 Adam, one thread
  double nvme_read_bytes_per_s = 0;  // whole node (all drives)
  double nvme_write_bytes_per_s = 0;
  double nvme_capacity_bytes = 0;
};

// How much of the network a collective across nodes gets (docs/cost_model.md §2.3): kNode, the
// node's NICs behind each ring (what one large nccl-tests collective alone reaches); kGpu, each
// rank its own share of the node's NICs, as if every rank's bytes crossed the network.
enum class RingNics { kNode, kGpu };

struct NetworkSpec {
  int nics_per_node = 0;
  double nic_bw_bytes_per_s = 0;  // effective per NIC (e.g. 24 GB/s for HDR 200 Gb/s)
  double latency_s = 0;           // per inter-node hop
  RingNics ring_nics = RingNics::kNode;
};

struct RuntimeSpec {
  double cuda_context_bytes = 0;   // per GPU: CUDA context, cuBLAS workspace, kernel images
  double nccl_buffer_bytes = 0;    // per GPU: NCCL channels' buffers for the communicators used
  double allocator_fragmentation = 0;  // extra fraction the caching allocator reserves at peak
  double host_process_bytes = 0;   // per rank on the host: the Python / PyTorch process itself
};

enum class Collective { kAllGather, kReduceScatter, kAllReduce };
const char* collective_name(Collective op);  // "all_gather", "reduce_scatter", "all_reduce"

// A measured collective of one group: time vs size, with its alpha-beta fit per size regime.
// `bytes` follows nccl-tests: the total buffer for all_gather / reduce_scatter, the per-rank
// buffer for all_reduce (reference/nccl_hardware.md §2.1).
struct CollectiveTable {
  struct Point {
    double bytes = 0;
    double seconds = 0;
  };
  struct Regime {  // t = alpha + beta * bytes for bytes <= max_bytes
    double max_bytes = 0;
    double alpha_s = 0;
    double beta_s_per_byte = 0;
  };
  Collective op = Collective::kAllReduce;
  int ranks = 0;
  int nodes = 1;
  std::vector<Point> points;    // sorted by bytes
  std::vector<Regime> regimes;  // sorted by max_bytes; may be empty (then points are used)
};

struct Profile {
  std::string name;
  std::string description;
  std::string file;  // where it was loaded from ("<stock>/a100.json" for built-in ones)
  GpuSpec gpu;
  NodeSpec node;
  NetworkSpec network;
  RuntimeSpec runtime;
  FrameworkSpec framework;  // optional "framework" section; else fitted_framework()
  std::vector<CollectiveTable> collectives;
  nlohmann::json sources;     // JSON pointer -> where the number comes from (stock profiles)
  nlohmann::json provenance;  // calibrated profiles: date, hosts, versions, command line

  // The measured table for (op, ranks, nodes), or nullptr.
  const CollectiveTable* find_collective(Collective op, int ranks, int nodes) const;
};

// Resolves a --hw value: an existing file path, or the name of a stock profile with or without
// ".json" ("a100", "a100.json"). Throws InputError naming the file and JSON pointer of a missing
// field, a wrong type, or a negative or zero bandwidth; an unknown name lists the stock ones.
Profile load_profile(const std::string& spec);
Profile profile_from_json(const nlohmann::json& json, const std::string& file);
// The inverse of profile_from_json (same units as the files): used by calibration.
nlohmann::json profile_to_json(const Profile& profile);
std::vector<std::string> stock_profile_names();

// The devices a run uses: `gpus` data-parallel ranks on `nodes` nodes of `profile`'s type.
struct Cluster {
  Profile profile;
  int gpus = 1;
  int nodes = 1;
  int gpus_per_node() const { return gpus / nodes; }
};

// Throws InputError naming --gpus / --nodes when gpus < 1, nodes < 1, gpus not a multiple of
// nodes, or more GPUs per node than the profile's node has.
Cluster make_cluster(Profile profile, int gpus, int nodes);

}  // namespace zplan::hardware

#endif  // ZPLAN_HARDWARE_PROFILE_H_
