// The hardware cost functions. docs/cost_model.md derives each formula; the comments here name
// the source. Everything below runs in the simulator's and planner's inner loops: no allocation,
// no strings, no exceptions.
#include "hardware/cost_model.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace zplan::hardware {

namespace {

constexpr double kUs = 1e-6;
constexpr double kGBps = 1e9;

// ---------------------------------------------------------------------------------------------
// NCCL's tuning constants, as reference/nccl_hardware.md §1.2 lists them from NVIDIA/nccl
// src/graph/tuning.cc (ncclTunerConstantsDefaults, master 5067397c; unchanged since 2.23 for the
// entries used here). Indices: algorithm [Tree, Ring], protocol [LL, LL128, Simple], hardware
// [NVLINK, PCI, NET], architecture [Volta, Ampere, Hopper, Blackwell], scale [1 node, 2 nodes,
// >= 3 nodes]. Latencies in microseconds, bandwidths in GB/s (1e9 B/s).
enum NcclAlgo { kTree = 0, kRing = 1, kNumAlgos = 2 };
enum NcclProto { kLL = 0, kLL128 = 1, kSimple = 2, kNumProtos = 3 };
enum NcclHw { kHwNvlink = 0, kHwPci = 1, kHwNet = 2 };

constexpr const char* kAlgoNames[kNumAlgos] = {"tree", "ring"};
constexpr const char* kProtoNames[kNumProtos] = {"LL", "LL128", "Simple"};

struct NcclConstants {
  double base_latency_us[kNumAlgos][kNumProtos];   // baseLatencies
  double hw_latency_us[3][kNumAlgos][kNumProtos];  // hwLatencies, per hop
  double nvls_latency_us;                          // hwLatencies[NVLINK][NVLS][Simple]
  // llMaxBws[row][scale]: one node -> row = GPU arch; more nodes -> row = CPU vendor (0 Intel
  // and others, 1 AMD), so rows 2-3 are only read single-node.
  double ll_max_bw[4][3];
  double per_ch_max_ring_ll128_bw[4][3];
  double per_ch_max_tree_ll128_bw[4][3];
  double per_ch_max_tree_bw[4][3];
  double net_overhead_us_intel;  // getNetOverhead: Intel x86 (and non-x86)
  double net_overhead_us_amd;
  double net_overhead_simple_factor;
  double ring_ll_efficiency;     // LL: 4 B of data per 8-byte store
  double ring_ll128_efficiency;  // LL128: 120 B of data per 128-byte line, rounded down
  double tree_efficiency;        // Tree AllReduce
  double tree_ll_divisor;
  double tree_ll128_factor_one_node;
  double tree_ll128_factor_multi_node;
  double tree_alg_over_bus;  // Tree: algBw = busBw * 0.5
  // ncclTopoGetAlgoTime: Ring/Simple AllReduce across nodes, bytes per channel per rank >= 64.
  double plateau_min_bytes;
  double plateau_factor_volta;
  double plateau_factor_ampere_on;
};

constexpr NcclConstants kNccl = {
    /*base_latency_us=*/{{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}},
    /*hw_latency_us=*/
    {{{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}},
     {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}},
     {{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}}},
    /*nvls_latency_us=*/25.0,
    /*ll_max_bw=*/{{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282, 90, 70}},
    /*per_ch_max_ring_ll128_bw=*/
    {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {40, 40, 40}},
    /*per_ch_max_tree_ll128_bw=*/
    {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}},
    /*per_ch_max_tree_bw=*/
    {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}},
    /*net_overhead_us_intel=*/1.0,
    /*net_overhead_us_amd=*/2.0,
    /*net_overhead_simple_factor=*/3.0,
    /*ring_ll_efficiency=*/0.5,
    /*ring_ll128_efficiency=*/0.92,
    /*tree_efficiency=*/0.92,
    /*tree_ll_divisor=*/3.8,
    /*tree_ll128_factor_one_node=*/7.0 / 9.0,
    /*tree_ll128_factor_multi_node=*/120.0 / 128.0,
    /*tree_alg_over_bus=*/0.5,
    /*plateau_min_bytes=*/64,
    /*plateau_factor_volta=*/1.9,
    /*plateau_factor_ampere_on=*/1.4,
};

// Bandwidth of one NCCL channel, used only to estimate the channel count that NCCL's per-channel
// caps multiply: the per-NVLink rate NCCL's topology search assumes (src/graph/topo.h via
// reference §1.2: SM70 20, SM80 20, SM90 20.6, SM100 40.1 GB/s), and PCI_BW 12 GB/s for PCIe.
constexpr double kNvlinkChannelGbps[4] = {20.0, 20.0, 20.6, 40.1};
constexpr double kPcieChannelGbps = 12.0;

// Ring bandwidth across nodes as measured, against NCCL's model of it: nccl-tests on DGX-class
// nodes with one InfiniBand NIC per GPU (docs/cost_model.md, "Collectives across many nodes").
// Up to 4 nodes a ring gets the whole node's NICs: 365.84 GB/s all_reduce busbw on 4 x 8 H100 with
// 8 NDR NICs, min(370, 8 x 48) predicted (NVIDIA/nccl-tests#309); 86 of 96 GB/s on 2 x 8 A100 with
// 4 HDR (NVIDIA/nccl#1048); 96 GB/s peak on 3 x 8 A100 with 4 HDR (NVIDIA/nccl-tests#119). At 32
// nodes the same kind of node reaches 200 GB/s all_gather busbw at 2 GiB (256 H100, 8 x 400 Gb,
// NVIDIA/nccl#1218), where NCCL's model with the full NICs predicts ~312: the ring's k flows cross
// the fabric's spine, where they share links (static routing puts several on one), so each node
// gets less than its NICs. kFabricEfficiency32 is the fraction of the NICs that reproduces the
// 32-node figure through this model (tests/hardware/cost_model_test.cc checks it); between 4 and
// 32 nodes it is interpolated in log2(nodes); beyond 32 nodes it is held, because no measurement
// beyond was found (a calibrated table of the user's fabric replaces all of this).
constexpr double kFabricFullNodes = 4;
constexpr double kFabricMeasuredNodes = 32;
constexpr double kFabricEfficiency32 = 0.59;

// NVLink SHARP needs more than 4 GPUs to beat the ring (reference §3.3, §5.3: stas00 measured
// the switch at 5 GPUs on H200).
constexpr int kNvlsMinRanks = 5;


int arch_index(Arch arch) {
  switch (arch) {
    case Arch::kVolta:
      return 0;
    case Arch::kAmpere:
      return 1;
    case Arch::kHopper:
      return 2;
    case Arch::kBlackwell:
    case Arch::kCpu:
      return 3;
  }
  return 1;
}

// Ring steps (nccl-tests' busbw factor times n): AllReduce 2(n-1), AllGather/ReduceScatter n-1
// (reference §1.3, §2.1).
double ring_steps(Collective op, int n) {
  return op == Collective::kAllReduce ? 2.0 * (n - 1) : double(n - 1);
}

// The fraction of a node's NIC bandwidth a collective across `nodes` nodes gets (above).
double fabric_efficiency(int nodes) {
  if (nodes <= kFabricFullNodes) return 1.0;
  const double t = std::min(1.0, std::log2(nodes / kFabricFullNodes) /
                                     std::log2(kFabricMeasuredNodes / kFabricFullNodes));
  return 1.0 - t * (1.0 - kFabricEfficiency32);
}

struct Best {
  double latency_s = 0;
  double transfer_s = 0;
  const char* algorithm = "";
  const char* protocol = "";
  bool set = false;
  void offer(double lat_s, double transfer, const char* algo, const char* proto) {
    // Strictly faster only: ties keep NCCL's enumeration order (Tree, Ring, NVLS; LL, LL128,
    // Simple), as topoGetAlgoInfo() does.
    if (!set || lat_s + transfer < latency_s + transfer_s) {
      latency_s = lat_s;
      transfer_s = transfer;
      algorithm = algo;
      protocol = proto;
      set = true;
    }
  }
};

// NCCL's model (reference §1.3, §1.4) for GPUs on NVLink or PCIe.
CollectiveCost nccl_model(const Cluster& c, Collective op, double bytes) {
  const Profile& p = c.profile;
  const int n = c.gpus;
  const int k = std::max(1, c.nodes);
  const int ppn = std::max(1, n / k);
  const int a = arch_index(p.gpu.arch);
  const int scale = k == 1 ? 0 : (k == 2 ? 1 : 2);
  const bool all_reduce = op == Collective::kAllReduce;
  const NcclHw intra_hw = p.node.intra_link == IntraLink::kNvlink ? kHwNvlink : kHwPci;
  const double intra_gbps = p.node.intra_busbw_bytes_per_s / kGBps;

  // The profile's intra_busbw is the measured Ring/Simple bus bandwidth, i.e. NCCL's
  // nChannels * bwIntra; the channel count is estimated from the per-link rate (docs).
  const double channel_gbps = intra_hw == kHwNvlink ? kNvlinkChannelGbps[a] : kPcieChannelGbps;
  const double channels = std::max(1.0, std::round(intra_gbps / channel_gbps));

  // Raw bus bandwidth before protocol factors. Ring across nodes: min(intra, NICs of a node)
  // (§5.3). Tree across 2 nodes crosses the network with half the ring's bytes, so NCCL uses
  // bwIntra there (§1.3, §3.4 nccl-tests#309); from 3 nodes on the NICs bind [derivation, docs].
  const double net_gbps = k > 1 ? ring_network_bw(p, ppn, k) / kGBps : 0;
  assert(k == 1 || net_gbps > 0);  // make_cluster rejects nodes > 1 without NICs
  const double ring_raw = k == 1 ? intra_gbps : std::min(intra_gbps, net_gbps);
  const double tree_raw =
      k == 1 ? intra_gbps : std::min(intra_gbps, (k == 2 ? 2.0 : 1.0) * net_gbps);

  const int ll_row = k == 1 ? a : (p.node.cpu_vendor == CpuVendor::kAmd ? 1 : 0);
  const double ll_max = kNccl.ll_max_bw[ll_row][scale];
  const double net_overhead_us = p.node.cpu_vendor == CpuVendor::kAmd ? kNccl.net_overhead_us_amd
                                                                      : kNccl.net_overhead_us_intel;
  const double latency_inter_us = p.network.latency_s / kUs;
  // NCCL enables LL128 where 128-byte stores arrive whole, i.e. over NVLink [est, docs].
  const bool ll128_enabled = intra_hw == kHwNvlink;

  const double steps = ring_steps(op, n);
  const double inter_steps = k == 1 ? 0.0 : (all_reduce ? 2.0 * (k - 1) : double(k - 1));

  Best best;
  for (int algo = kTree; algo < kNumAlgos; ++algo) {
    if (algo == kTree && !all_reduce) continue;  // NCCL's Tree runs AllReduce only
    for (int proto = kLL; proto < kNumProtos; ++proto) {
      if (proto == kLL128 && !ll128_enabled) continue;
      const bool simple = proto == kSimple;

      // Latency (§1.4).
      double intra_lat = kNccl.hw_latency_us[intra_hw][algo][proto];
      const int net_algo = (algo == kRing && ppn == 1) ? kTree : algo;
      const double inter_lat =
          kNccl.hw_latency_us[kHwNet][net_algo][proto] + latency_inter_us * (simple ? 2 : 1);
      double lat_us = kNccl.base_latency_us[algo][proto];
      if (algo == kRing) {
        if (k > 1) {
          intra_lat = std::max(intra_lat,
                               net_overhead_us * (simple ? kNccl.net_overhead_simple_factor : 1));
        }
        lat_us += (steps - inter_steps) * intra_lat + inter_steps * inter_lat;
        if (all_reduce && simple && k > 1 && bytes / (channels * n) >= kNccl.plateau_min_bytes) {
          lat_us *= a == 0 ? kNccl.plateau_factor_volta : kNccl.plateau_factor_ampere_on;
        }
      } else {
        lat_us += 2 * ((ppn - 1) * intra_lat + std::log2(double(k)) * inter_lat);
      }

      // Bus bandwidth (§1.3), then algorithm bandwidth.
      double bus_gbps;
      double alg_gbps;
      if (algo == kRing) {
        if (proto == kLL) {
          bus_gbps = std::min(ll_max, kNccl.ring_ll_efficiency * ring_raw);
        } else if (proto == kLL128) {
          bus_gbps = std::min(kNccl.ring_ll128_efficiency * ring_raw,
                              channels * kNccl.per_ch_max_ring_ll128_bw[a][scale]);
        } else {
          bus_gbps = ring_raw;
        }
        alg_gbps = bus_gbps * n / steps;
      } else {
        double tree = std::min(kNccl.tree_efficiency * tree_raw,
                               channels * kNccl.per_ch_max_tree_bw[a][scale]);
        if (proto == kLL) {
          bus_gbps = std::min(tree / kNccl.tree_ll_divisor, ll_max);
        } else if (proto == kLL128) {
          double f = k == 1 ? kNccl.tree_ll128_factor_one_node : kNccl.tree_ll128_factor_multi_node;
          bus_gbps = std::min(tree * f, channels * kNccl.per_ch_max_tree_ll128_bw[a][scale]);
        } else {
          bus_gbps = tree;
        }
        alg_gbps = bus_gbps * kNccl.tree_alg_over_bus;
      }
      best.offer(lat_us * kUs, bytes / (alg_gbps * kGBps), kAlgoNames[algo], kProtoNames[proto]);
    }
  }

  // NVLS: one Simple candidate, latency hwLat[NVLINK][NVLS] with no base (§1.4); bus -> alg as
  // for Ring (§1.3), with the measured NVLS bus bandwidth (§3.3).
  if (all_reduce && k == 1 && n >= kNvlsMinRanks && p.node.nvls_busbw_bytes_per_s > 0) {
    double alg = p.node.nvls_busbw_bytes_per_s * n / steps;
    best.offer(kNccl.nvls_latency_us * kUs, bytes / alg, "nvls", "Simple");
  }

  CollectiveCost cost;
  cost.latency_s = best.latency_s;
  cost.transfer_s = best.transfer_s;
  cost.link = k == 1 ? Link::kIntraNode : Link::kNetwork;
  cost.algorithm = best.algorithm;
  cost.protocol = best.protocol;
  return cost;
}

// CPU ranks over MPI (shared memory inside a node): the ring rows of Thakur, Rabenseifner &
// Gropp (reference §5.2) with the profile's per-step latencies and NCCL's inter-node step count.
// The nodes' link is the calibrated "NIC" itself, so network.ring_nics (an NCCL-ring question)
// does not apply.
CollectiveCost alpha_beta_ring(const Cluster& c, Collective op, double bytes) {
  const Profile& p = c.profile;
  const int n = c.gpus;
  const int k = std::max(1, c.nodes);
  const int ppn = std::max(1, n / k);
  const double steps = ring_steps(op, n);
  const double inter_steps =
      k == 1 ? 0.0 : (op == Collective::kAllReduce ? 2.0 * (k - 1) : double(k - 1));
  double busbw = p.node.intra_busbw_bytes_per_s;
  if (k > 1) busbw = std::min(busbw, node_network_bw(p, ppn));
  CollectiveCost cost;
  cost.latency_s =
      (steps - inter_steps) * p.node.intra_latency_s + inter_steps * p.network.latency_s;
  cost.transfer_s = bytes * (steps / n) / busbw;
  cost.link = k == 1 ? Link::kIntraNode : Link::kNetwork;
  cost.algorithm = "ring";
  cost.protocol = "";
  return cost;
}

// The measured table: piecewise linear between points; below the first point the first segment
// extended, floored by the proportional line through the origin; beyond the last point the last
// regime's beta (or the last segment's slope) from the last point (docs/cost_model.md).
CollectiveCost from_table(const CollectiveTable& t, double bytes) {
  const auto& pts = t.points;
  auto slope = [&](size_t i) {  // of the segment pts[i] -> pts[i + 1], never negative
    return std::max(0.0, (pts[i + 1].seconds - pts[i].seconds) / (pts[i + 1].bytes - pts[i].bytes));
  };
  double seconds;
  if (bytes <= pts.front().bytes) {
    const auto& first = pts.front();
    double s0 = pts.size() > 1 ? slope(0) : 0.0;
    seconds =
        std::max(first.seconds - (first.bytes - bytes) * s0, first.seconds * bytes / first.bytes);
  } else if (bytes >= pts.back().bytes) {
    const auto& last = pts.back();
    double beta = last.seconds / last.bytes;
    if (!t.regimes.empty()) {
      beta = t.regimes.back().beta_s_per_byte;
    } else if (pts.size() > 1) {
      beta = slope(pts.size() - 2);
    }
    seconds = last.seconds + (bytes - last.bytes) * beta;
  } else {
    auto hi =
        std::lower_bound(pts.begin(), pts.end(), bytes,
                         [](const CollectiveTable::Point& q, double b) { return q.bytes < b; });
    if (hi->bytes == bytes) {
      seconds = hi->seconds;
    } else {
      auto lo = hi - 1;
      seconds =
          lo->seconds + (hi->seconds - lo->seconds) * (bytes - lo->bytes) / (hi->bytes - lo->bytes);
    }
  }
  // The latency part: the fitted alpha of the regime that holds `bytes`, else the first point's
  // time (the small-size plateau); never more than the total.
  double alpha = pts.front().seconds;
  if (!t.regimes.empty()) {
    alpha = t.regimes.back().alpha_s;
    for (const auto& g : t.regimes) {
      if (bytes <= g.max_bytes) {
        alpha = g.alpha_s;
        break;
      }
    }
  }
  CollectiveCost cost;
  cost.latency_s = std::min(alpha, seconds);
  cost.transfer_s = seconds - cost.latency_s;
  cost.link = t.nodes == 1 ? Link::kIntraNode : Link::kNetwork;
  cost.algorithm = "table";
  cost.protocol = "";
  return cost;
}

double share(double total, int ways) { return total / std::max(1, ways); }

}  // namespace

// A rail-optimised node gives each GPU its share of the NICs, and one GPU alone still drives a
// whole NIC [est, §5.3].
double node_network_bw(const Profile& p, int ppn) {
  const double nics = p.network.nics_per_node;
  const int gpn = std::max(1, p.node.gpus_per_node);
  double used = std::clamp(nics * ppn / gpn, std::min(1.0, nics), nics);
  return used * p.network.nic_bw_bytes_per_s;
}

// kNode: NCCL's ring crosses each node boundary once per channel, its channels leave through
// different NICs, so every rank's bus bandwidth is what the node's NICs carry, less the fabric's
// contention at many nodes (reference §5.3; docs/cost_model.md §2.3). kGpu, the alternative a peer
// simulator (Calculon) assumes: every rank's bytes cross the network at its own share of the NICs,
// flat in the node count. docs/fidelity.md, "Which inter-node model the measurements favour", runs
// the set under both: the ZeRO++ paper's ZeRO-3 baselines on 1-8 NICs per node need the first.
double ring_network_bw(const Profile& p, int ppn, int nodes) {
  const double node_bw = node_network_bw(p, ppn);
  if (p.network.ring_nics == RingNics::kGpu) return node_bw / std::max(1, ppn);
  return node_bw * fabric_efficiency(nodes);
}

double gemm_efficiency(const GpuSpec& gpu, double flops) {
  const auto& curve = gpu.gemm_efficiency;
  if (curve.empty()) return 1.0;
  if (!(flops > curve.front().flops)) return curve.front().efficiency;
  if (flops >= curve.back().flops) return curve.back().efficiency;
  auto hi = std::upper_bound(curve.begin(), curve.end(), flops,
                             [](double f, const GemmEfficiencyPoint& q) { return f < q.flops; });
  auto lo = hi - 1;
  double t = std::log(flops / lo->flops) / std::log(hi->flops / lo->flops);
  return lo->efficiency + t * (hi->efficiency - lo->efficiency);
}

double peak_flops_per_s(const GpuSpec& gpu, int dtype_bytes) {
  // fp32 GEMMs run on the fp32 units (PyTorch leaves TF32 off for matmul by default); a cpu device
  // has only its fp32 rate, whatever the dtype (docs/cost_model.md).
  const bool fp32_rate = gpu.arch == Arch::kCpu || dtype_bytes >= 4;
  return fp32_rate ? gpu.peak_fp32_flops_per_s : gpu.peak_flops_per_s;
}

double attention_time_s(const GpuSpec& gpu, double flops, int dtype_bytes, bool flash3) {
  if (!(flops > 0)) return 0;
  const double efficiency = flash3 && gpu.flash3_attention_efficiency > 0
                                ? gpu.flash3_attention_efficiency
                                : gpu.attention_efficiency;
  return flops / (peak_flops_per_s(gpu, dtype_bytes) * efficiency) + gpu.kernel_launch_s;
}

double gemm_time_s(const GpuSpec& gpu, double m, double n, double k, int dtype_bytes) {
  if (!(m > 0 && n > 0 && k > 0)) return 0;
  const double flops = 2 * m * n * k;
  const double peak = peak_flops_per_s(gpu, dtype_bytes);
  const double compute_s = flops / (peak * gemm_efficiency(gpu, flops));
  // Reads A and B, writes C once.
  const double bytes = dtype_bytes * (m * k + k * n + m * n);
  const double memory_s = bytes / (gpu.hbm_bw_bytes_per_s * gpu.hbm_efficiency);
  return std::max(compute_s, memory_s) + gpu.kernel_launch_s;
}

double memory_bound_time_s(const GpuSpec& gpu, double bytes) {
  if (!(bytes > 0)) return 0;
  return bytes / (gpu.hbm_bw_bytes_per_s * gpu.hbm_efficiency) + gpu.kernel_launch_s;
}

CollectiveCost collective_cost(const Cluster& cluster, Collective op, double bytes) {
  CollectiveCost cost;
  if (cluster.gpus <= 1 || !(bytes > 0)) {
    cost.link = Link::kNone;
    cost.algorithm = "none";
    return cost;
  }
  const Profile& p = cluster.profile;
  const CollectiveTable* table = p.find_collective(op, cluster.gpus, cluster.nodes);
  if (table != nullptr && !table->points.empty()) return from_table(*table, bytes);
  if (p.node.intra_link == IntraLink::kSharedMemory || p.gpu.arch == Arch::kCpu) {
    return alpha_beta_ring(cluster, op, bytes);
  }
  return nccl_model(cluster, op, bytes);
}

double pcie_uplink_share(const NodeSpec& node, int ranks_per_node) {
  const int sharers = std::max(1, std::min(node.gpus_per_pcie_switch, ranks_per_node));
  return node.pcie_uplink_bytes_per_s / sharers;
}

namespace {

// A rank's host-copy rate: its GPU's own (the solo measurement, which already crossed the
// uplink) or, when other GPUs under its switch copy at the same time, their common uplink's share.
double host_copy_rate(const NodeSpec& node, double own, int ranks_per_node) {
  if (std::min(node.gpus_per_pcie_switch, ranks_per_node) <= 1) return own;
  return std::min(own, pcie_uplink_share(node, ranks_per_node));
}

}  // namespace

double h2d_time_s(const NodeSpec& node, double bytes, bool pinned, int ranks_per_node) {
  if (!(bytes > 0)) return 0;
  const double own = pinned ? node.h2d_pinned_bytes_per_s : node.h2d_pageable_bytes_per_s;
  return bytes / host_copy_rate(node, own, ranks_per_node);
}

double d2h_time_s(const NodeSpec& node, double bytes, bool pinned, int ranks_per_node) {
  if (!(bytes > 0)) return 0;
  const double own = pinned ? node.d2h_pinned_bytes_per_s : node.d2h_pageable_bytes_per_s;
  return bytes / host_copy_rate(node, own, ranks_per_node);
}

double nvme_read_time_s(const NodeSpec& node, double bytes, int ranks_per_node) {
  if (!(bytes > 0)) return 0;
  return bytes / share(node.nvme_read_bytes_per_s, ranks_per_node);
}

double nvme_write_time_s(const NodeSpec& node, double bytes, int ranks_per_node) {
  if (!(bytes > 0)) return 0;
  return bytes / share(node.nvme_write_bytes_per_s, ranks_per_node);
}

double cpu_adam_time_s(const NodeSpec& node, double params, int threads, int ranks_per_node) {
  if (!(params > 0)) return 0;
  // t = N / min(threads * r_thread, DRAM share / 28 B) (reference §6).
  const double compute_rate = std::max(1, threads) * node.cpu_adam_params_per_s_per_core;
  const double memory_rate =
      share(node.host_memory_bw_bytes_per_s, ranks_per_node) / kAdamBytesPerParam;
  return params / std::min(compute_rate, memory_rate);
}

// --- Framework terms -----------------------------------------------------------------------------

double host_dispatch_s(const Profile& profile, double ops) {
  if (profile.gpu.arch == Arch::kCpu || !(ops > 0)) return 0;
  return ops * profile.framework.host_op_s;
}

double stage3_hook_s(const Profile& profile, double uses) {
  if (profile.gpu.arch == Arch::kCpu || !(uses > 0)) return 0;
  return uses * profile.framework.stage3_fetch_s;
}

double step_overhead_s(const Profile& profile) {
  return profile.gpu.arch == Arch::kCpu ? 0 : profile.framework.step_overhead_s;
}

double pageable_copy_time_s(const Profile& profile, double bytes, bool h2d, int ranks_per_node) {
  if (!(bytes > 0)) return 0;
  const NodeSpec& node = profile.node;
  const double solo = h2d ? node.h2d_pageable_bytes_per_s : node.d2h_pageable_bytes_per_s;
  const double dram = node.host_memory_bw_bytes_per_s / (3.0 * std::max(1, ranks_per_node));
  return bytes / std::min(host_copy_rate(node, solo, ranks_per_node), dram);
}

double host_pass_time_s(const Profile& profile, double bytes, int ranks_per_node) {
  if (!(bytes > 0)) return 0;
  return bytes / share(profile.node.host_memory_bw_bytes_per_s, ranks_per_node);
}

int cpu_core_share(const NodeSpec& node, int ranks_per_node) {
  return std::max(1, node.cpu_cores / std::max(1, ranks_per_node));
}

CpuAdamThreads cpu_adam_threads(const Profile& profile, int ranks_per_node) {
  const NodeSpec& node = profile.node;
  const int ranks = std::max(1, ranks_per_node);
  CpuAdamThreads t;
  t.share = cpu_core_share(node, ranks);
  t.threads = t.share;
  // OMP_NUM_THREADS set so low that the node's pools fit its cores (torchrun's 1, or deepspeed
  // --bind_cores_to_rank's cores / ranks): each rank runs exactly that many threads. Unset, or
  // set higher: the fair share (at least one core), at what oversubscribed OpenMP pools keep of
  // it.
  const int omp = profile.framework.omp_num_threads;
  if (omp > 0 && static_cast<int64_t>(omp) * ranks <= node.cpu_cores) {
    t.rule = CpuAdamThreads::Rule::kOmpNumThreads;
    t.threads = omp;
  } else if (ranks > 1 && profile.gpu.arch != Arch::kCpu) {
    t.rule = CpuAdamThreads::Rule::kOversubscribed;
    t.threads *= profile.framework.cpu_oversubscription_efficiency;
  }
  return t;
}

double offload_cpu_adam_time_s(const Profile& profile, double params, int ranks_per_node,
                               double bytes_per_param) {
  if (!(params > 0)) return 0;
  const NodeSpec& node = profile.node;
  const int ranks = std::max(1, ranks_per_node);
  const double threads = cpu_adam_threads(profile, ranks).threads;
  // t = N / min(threads * r_thread, DRAM share / 28 B), as cpu_adam_time_s (reference §6).
  const double compute_rate = threads * node.cpu_adam_params_per_s_per_core;
  const double memory_rate = share(node.host_memory_bw_bytes_per_s, ranks) / bytes_per_param;
  return params / std::min(compute_rate, memory_rate);
}

}  // namespace zplan::hardware
