// Cost functions of the hardware: how long a GEMM, a memory-bound kernel, a collective or a copy
// takes on a profile, in seconds. The simulator calls these once per task while building a step;
// they must be cheap (no allocation) and pure. docs/cost_model.md derives every formula.
#ifndef ZPLAN_HARDWARE_COST_MODEL_H_
#define ZPLAN_HARDWARE_COST_MODEL_H_

#include "hardware/profile.h"

namespace zplan::hardware {

// Fraction of peak reached by one GEMM of `flops` FLOPs (the profile's efficiency curve).
double gemm_efficiency(const GpuSpec& gpu, double flops);

// Roofline time of C[m x n] = A[m x k] B[k x n] in 16-bit (or fp32 on a kCpu device):
// max(2mnk / (peak * efficiency), bytes moved / (hbm_bw * hbm_efficiency)) + kernel_launch.
double gemm_time_s(const GpuSpec& gpu, double m, double n, double k, int dtype_bytes);

// The peak FLOP/s GEMMs of `dtype_bytes`-byte elements run against: the fp32 rate for 4-byte
// types (PyTorch leaves TF32 off for matmul) and always on a cpu device, else the 16-bit rate.
double peak_flops_per_s(const GpuSpec& gpu, int dtype_bytes);

// A fused (flash) attention kernel of `flops` FLOPs: flops / (peak * attention_efficiency) +
// launch (FlashAttention-2 reaches 50-73% of an A100's peak, not a GEMM's ~87%); with `flash3`,
// at the profile's flash3_attention_efficiency where it gives one.
double attention_time_s(const GpuSpec& gpu, double flops, int dtype_bytes, bool flash3 = false);

// A kernel limited by memory bandwidth that reads and writes `bytes` in total.
double memory_bound_time_s(const GpuSpec& gpu, double bytes);

// Which shared link a transfer loads; the simulator splits each link's bandwidth between the
// transfers that use it at the same time.
enum class Link { kIntraNode, kNetwork, kPcie, kNvme, kNone };

// The time of one collective, split so that the simulator can share link bandwidth:
// total = latency_s + transfer_s, where transfer_s is the time at the full link rate.
struct CollectiveCost {
  double latency_s = 0;
  double transfer_s = 0;
  Link link = Link::kIntraNode;
  const char* algorithm = "";  // "ring", "tree", "nvls", "table"
  const char* protocol = "";   // "LL", "LL128", "Simple", ""
  double total_s() const { return latency_s + transfer_s; }
};

// The cost of collective `op` of `bytes` (nccl-tests' S: the total buffer for all_gather and
// reduce_scatter, the per-rank buffer for all_reduce) among all cluster.gpus ranks. With a
// measured table for that group in the profile, the table (interpolated; beyond its end, the
// last regime's fit) wins; otherwise NCCL's own model: every (ring|tree) x (LL|LL128|Simple)
// candidate's latency and bus bandwidth from NVIDIA/nccl src/graph/tuning.cc, hierarchical across
// nodes, and the fastest one chosen as NCCL does (reference/nccl_hardware.md §1, §5).
// A group of one rank costs nothing.
CollectiveCost collective_cost(const Cluster& cluster, Collective op, double bytes);

// Network bandwidth of one node, bytes/s, for a job that runs `ppn` of its GPUs there.
double node_network_bw(const Profile& p, int ppn);

// Network bandwidth, bytes/s, a ring collective across `nodes` nodes with `ppn` ranks on each
// gets: bus bandwidth, the rate of every rank's (n-1)/n-per-step traffic (docs/cost_model.md §2.3).
double ring_network_bw(const Profile& p, int ppn, int nodes);

// Host <-> device copy of `bytes` by one of the node's `ranks_per_node` ranks, which run the same
// step and so copy at the same moments (pinned or pageable host memory): the GPU's own measured
// rate alone under its switch, else the lower of that and its share of the switch's uplink
// (pcie_uplink_share).
double h2d_time_s(const NodeSpec& node, double bytes, bool pinned, int ranks_per_node);
double d2h_time_s(const NodeSpec& node, double bytes, bool pinned, int ranks_per_node);

// A GPU's share, bytes/s, of its PCIe switch's uplink to the CPU while the node's ranks copy at
// once. The ranks fill the node's GPUs in order (the launchers' CUDA_VISIBLE_DEVICES 0..r-1), so
// min(gpus_per_pcie_switch, ranks_per_node) of them sit under each switch; the uplink is split
// evenly between them (reference nccl_hardware.md §5.5: on DGX A100 two GPUs per Gen4 switch, "over
// 11 GB/s per GPU when two GPUs ... were under test concurrently ... over 22 GB/s" for one alone).
double pcie_uplink_share(const NodeSpec& node, int ranks_per_node);

// NVMe read / write of `bytes` by one of the node's `ranks_per_node` ranks, each getting an equal
// share of the node's drives.
double nvme_read_time_s(const NodeSpec& node, double bytes, int ranks_per_node);
double nvme_write_time_s(const NodeSpec& node, double bytes, int ranks_per_node);

// Bytes an Adam step moves per fp32 parameter: reads p, g, m, v (16 B), writes p, m, v (12 B)
// (reference §6).
inline constexpr double kAdamBytesPerParam = 28;

// DeepSpeedCPUAdam-like step over `params` fp32 parameters by one rank that owns `threads` cores:
// limited by the per-core rate and by the rank's share of host DRAM bandwidth at ~28 bytes per
// parameter (reference/nccl_hardware.md §6).
double cpu_adam_time_s(const NodeSpec& node, double params, int threads, int ranks_per_node);

// --- Framework terms: what eager PyTorch + DeepSpeed add around the kernels -------------------
// (hardware/framework.h holds the constants, fitted over docs/fidelity.md's set; docs/
// cost_model.md, "Framework terms", derives each.) A cpu device (zplan's own executor) has none
// of them: each returns 0 there, or the plain formula above.

// Host-side floor of `ops` eager operators: the Python thread issues them one by one
// (FrameworkSpec::host_op_s each) while the GPU runs asynchronously behind it, so a stretch of
// GPU work lasts max(its kernels, host_dispatch_s(ops)).
double host_dispatch_s(const Profile& profile, double ops);

// The host time of one optimizer step outside its kernels (FrameworkSpec::step_overhead_s).
double step_overhead_s(const Profile& profile);

// The host time of `uses` stage-3 module fetch-and-release pairs beyond their operators
// (FrameworkSpec::stage3_fetch_s each): Python that launches no kernel, on the thread that
// issues the kernels, so it adds to host_dispatch_s in a piece's host floor.
double stage3_hook_s(const Profile& profile, double uses);

// A copy of `bytes` between one GPU and pageable host memory while all `ranks_per_node` ranks of
// the node copy at once: the driver stages each byte through a pinned bounce buffer (read the
// pageable page, write the bounce buffer, DMA-read it: 3 passes over host DRAM), so each rank
// gets min(its solo pageable rate or its uplink share as h2d_time_s, host_memory_gbps /
// (3 * ranks)).
double pageable_copy_time_s(const Profile& profile, double bytes, bool h2d, int ranks_per_node);

// One pass of `bytes` over host DRAM by one of `ranks_per_node` ranks doing the same at once:
// bytes / (host_memory_gbps / ranks). The host-side element-wise work of ZeRO-Offload's step
// (unscale_and_clip_grads on the fp32 gradients, the fp32 -> 16-bit cast of the new parameters):
// memory-bound PyTorch CPU kernels over the rank's partition.
double host_pass_time_s(const Profile& profile, double bytes, int ranks_per_node);

// A rank's fair share of the node's cores when `ranks_per_node` ranks share them (at least one):
// what --bind_cores_to_rank gives each rank (deepspeed/launcher/launch.py: cores / ranks).
int cpu_core_share(const NodeSpec& node, int ranks_per_node);

// The threads each of `ranks_per_node` ranks' DeepSpeedCPUAdam is priced with, and why (the
// rule offload_cpu_adam_time_s prices and the plan's "CPU Adam threads" line states):
// FrameworkSpec::omp_num_threads t when t > 0 and t * ranks <= cores; the fair share (cores /
// ranks, at least one) at FrameworkSpec::cpu_oversubscription_efficiency when several GPU ranks'
// default OpenMP pools oversubscribe the cores; else the fair share whole.
struct CpuAdamThreads {
  enum class Rule { kOmpNumThreads, kOversubscribed, kFairShare };
  Rule rule = Rule::kFairShare;
  double threads = 1;  // as priced
  int share = 1;       // cpu_core_share
};
CpuAdamThreads cpu_adam_threads(const Profile& profile, int ranks_per_node);

// DeepSpeedCPUAdam over `params` fp32 parameters by one of `ranks_per_node` ranks that all step
// at once: cpu_adam_time_s with the rank's fair share of the cores (cores / ranks, as
// step_builder does) at FrameworkSpec::cpu_oversubscription_efficiency when the node has more
// than one rank (their default OpenMP pools oversubscribe the cores; deepspeed/launcher/
// launch.py sets OMP_NUM_THREADS only with --bind_cores_to_rank); with
// FrameworkSpec::omp_num_threads t > 0 and t * ranks <= cores, exactly t threads per rank.
// DeepSpeedCPULion and DeepSpeedCPUAdagrad are priced the same way with their own
// `bytes_per_param` (fewer states than Adam: 20 bytes) for the DRAM bound and the calibrated
// CPU-Adam rate for the compute bound: per element each does a subset of Adam's arithmetic (Lion
// an interpolation, a sign and an update, no square root or division; Adagrad one square, a
// square root and a division), so Adam's rate bounds their time from above
// (csrc/lion/cpu_lion_impl.cpp, csrc/adagrad/cpu_adagrad.cpp).
double offload_cpu_adam_time_s(const Profile& profile, double params, int ranks_per_node,
                               double bytes_per_param = kAdamBytesPerParam);

}  // namespace zplan::hardware

#endif  // ZPLAN_HARDWARE_COST_MODEL_H_
