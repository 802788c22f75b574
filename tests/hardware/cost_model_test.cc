#include "hardware/cost_model.h"

#include <cmath>
#include <string>

#include <catch2/catch.hpp>

#include "base/units.h"

namespace zplan::hardware {
namespace {

constexpr double kUs = 1e-6;

Cluster stock(const char* name, int gpus, int nodes = 1) {
  return make_cluster(load_profile(name), gpus, nodes);
}

std::string algo(const CollectiveCost& c) { return std::string(c.algorithm) + "/" + c.protocol; }

// A CPU box as `zplan calibrate` might describe it: 4 MPI ranks per node over shared memory.
Profile cpu_box() {
  Profile p = load_profile("a100");
  p.name = "cpu-box";
  p.gpu.arch = Arch::kCpu;
  p.gpu.peak_flops_per_s = 1e12;
  p.gpu.peak_fp32_flops_per_s = 1e11;
  p.node.gpus_per_node = 4;
  p.node.intra_link = IntraLink::kSharedMemory;
  p.node.intra_busbw_bytes_per_s = 5e9;
  p.node.intra_latency_s = 20e-6;
  p.network.nics_per_node = 1;
  p.network.nic_bw_bytes_per_s = 1.25e9;
  p.network.latency_s = 50e-6;
  return p;
}

TEST_CASE("NCCL model, one 8-GPU NVLink node: reference §1.5 latencies", "[hardware]") {
  // a100: Ampere, intra busbw 234.9 GB/s -> 12 channels of 20 GB/s.
  const Cluster c = stock("a100", 8);

  // All-reduce of 8 B: Ring LL = baseLat 6.6 + 2(8-1) = 14 steps x NVLink LL 0.6 = 15.0 us, just
  // below Tree LL = 6.8 + 2 x 7 x 0.6 = 15.2 us.
  CollectiveCost tiny = collective_cost(c, Collective::kAllReduce, 8);
  CHECK(algo(tiny) == "ring/LL");
  CHECK(tiny.latency_s == Approx(15.0 * kUs));
  CHECK(tiny.link == Link::kIntraNode);
  // LL bus bandwidth min(llMaxBw Ampere 87.7, 0.5 x 234.9) = 87.7 GB/s; algbw = 87.7 x 8/14.
  CHECK(tiny.transfer_s == Approx(8 / (87.7e9 * 8 / 14)));

  // All-reduce of 1 GiB: Ring Simple = 8.4 + 14 x 3.4 = 56.0 us; transfer 2(n-1)/n S / busbw.
  CollectiveCost big = collective_cost(c, Collective::kAllReduce, kGiB);
  CHECK(algo(big) == "ring/Simple");
  CHECK(big.latency_s == Approx(56.0 * kUs));
  CHECK(big.transfer_s == Approx(kGiB * 14 / 8 / 234.9e9));

  // 8 MiB sits between the crossovers: LL 15 + 8 MiB x 1.75 / 87.7 GB/s = 182 us, LL128
  // 14 + 14 x 1.9 = 40.6 us + 8 MiB x 1.75 / (0.92 x 234.9 GB/s) = 108 us, Simple 56 + 62.5 us.
  CollectiveCost mid = collective_cost(c, Collective::kAllReduce, 8 * kMiB);
  CHECK(algo(mid) == "ring/LL128");
  CHECK(mid.latency_s == Approx(40.6 * kUs));
  CHECK(mid.transfer_s == Approx(8 * kMiB * 14 / 8 / (0.92 * 234.9e9)));

  // All-gather / reduce-scatter: n-1 = 7 steps. Simple 8.4 + 7 x 3.4 = 32.2 us, LL 6.6 + 7 x 0.6 =
  // 10.8 us; S is the total buffer and the busbw factor (n-1)/n.
  CollectiveCost ag = collective_cost(c, Collective::kAllGather, kGiB);
  CHECK(algo(ag) == "ring/Simple");
  CHECK(ag.latency_s == Approx(32.2 * kUs));
  CHECK(ag.transfer_s == Approx(kGiB * 7 / 8 / 234.9e9));
  CollectiveCost rs = collective_cost(c, Collective::kReduceScatter, 64);
  CHECK(algo(rs) == "ring/LL");
  CHECK(rs.latency_s == Approx(10.8 * kUs));
}

TEST_CASE("NCCL model reproduces the measured 16 GiB all-reduce on 8 A100s", "[hardware]") {
  // reference §3.2: 127,997 us at 16 GiB. Model: 56 us + 2 x 7/8 x 16 GiB / 234.9 GB/s = 128.0 ms,
  // i.e. large all-reduce time ~ 2(n-1)/n S / busbw.
  CollectiveCost c = collective_cost(stock("a100", 8), Collective::kAllReduce, 16 * kGiB);
  CHECK(c.total_s() == Approx(127997 * kUs).epsilon(0.001));
  CHECK(c.total_s() == Approx(2.0 * 7 / 8 * 16 * kGiB / 234.9e9).epsilon(0.001));
}

TEST_CASE("NCCL model: NVLink SHARP wins large all-reduces on a full Hopper node", "[hardware]") {
  // NVLS: 25 us (no base latency) + 2 x 7/8 x 1 GiB / 480 GB/s = 3.94 ms, against Ring Simple
  // 56 us + 1.75 GiB / 370 GB/s = 5.13 ms.
  CollectiveCost c = collective_cost(stock("h100", 8), Collective::kAllReduce, kGiB);
  CHECK(algo(c) == "nvls/Simple");
  CHECK(c.latency_s == Approx(25 * kUs));
  CHECK(c.transfer_s == Approx(kGiB * 14 / 8 / 480e9));
  // Small messages stay on Ring LL (15.0 us < 25 us); 4 GPUs never use NVLS; nor do other ops.
  CHECK(algo(collective_cost(stock("h100", 8), Collective::kAllReduce, 1024)) == "ring/LL");
  CHECK(algo(collective_cost(stock("h100", 4), Collective::kAllReduce, kGiB)) == "ring/Simple");
  CHECK(algo(collective_cost(stock("h100", 8), Collective::kAllGather, kGiB)) == "ring/Simple");
}

TEST_CASE("NCCL model across nodes: reference §1.5 latencies", "[hardware]") {
  // h100: Intel host (net overhead 1 us), 8 NDR NICs of 48 GB/s, latencyInter 0, 18 channels.
  const Cluster two = stock("h100", 16, 2);

  // Tiny all-reduce: Tree LL = 6.8 + 2 x (7 x 0.6 + log2(2) x NET 5.0) = 25.2 us beats Ring LL =
  // 6.6 + (30 - 2) x max(0.6, 1.0) + 2 x NET 2.7 = 40.0 us.
  CollectiveCost tiny = collective_cost(two, Collective::kAllReduce, 8);
  CHECK(algo(tiny) == "tree/LL");
  CHECK(tiny.latency_s == Approx(25.2 * kUs));
  CHECK(tiny.link == Link::kNetwork);

  // 1 GiB all-reduce: Ring Simple = 8.4 + 28 x max(3.4, 3 x 1.0) + 2 x 14 = 131.6 us, x 1.4 for
  // the multi-node plateau = 184.24 us; busbw min(370, 8 x 48) = 370 GB/s, factor 2 x 15/16.
  CollectiveCost big = collective_cost(two, Collective::kAllReduce, kGiB);
  CHECK(algo(big) == "ring/Simple");
  CHECK(big.latency_s == Approx(131.6 * 1.4 * kUs));
  CHECK(big.transfer_s == Approx(kGiB * 30 / 16 / 370e9));

  // Tiny all-gather (no Tree): Ring LL = 6.6 + (15 - 1) x max(0.6, 1.0) + 1 x 2.7 = 23.3 us; on the
  // AMD host of a100 the net overhead is 2 us: 6.6 + 14 x 2.0 + 2.7 = 37.3 us.
  CHECK(collective_cost(two, Collective::kAllGather, 64).latency_s == Approx(23.3 * kUs));
  CHECK(collective_cost(stock("a100", 16, 2), Collective::kAllGather, 64).latency_s ==
        Approx(37.3 * kUs));

  // 16 nodes x 8: Ring Simple = 8.4 + (254 - 30) x 3.4 + 30 x 14 = 1190 us (x 1.4 at large
  // sizes), Tree LL128 = 14 + 2 x (7 x 1.25 + log2(16) x 8.5) = 99.5 us: Tree wins mid sizes
  // (4 MiB: 99.5 + 26 us against Ring LL 311.6 + 408 us), Ring wins 16 GiB (92 ms vs 101 ms).
  const Cluster many = stock("h100", 128, 16);
  CollectiveCost mid = collective_cost(many, Collective::kAllReduce, 4 * kMiB);
  CHECK(algo(mid) == "tree/LL128");
  CHECK(mid.latency_s == Approx(99.5 * kUs));
  CollectiveCost huge = collective_cost(many, Collective::kAllReduce, 16 * kGiB);
  CHECK(algo(huge) == "ring/Simple");
  CHECK(huge.latency_s == Approx(1190 * 1.4 * kUs));
}

TEST_CASE("NCCL model: more nodes cost more, fewer NICs cost more", "[hardware]") {
  for (const char* name : {"v100", "a100-40g", "a100", "h100", "h200"}) {
    CAPTURE(name);
    for (double bytes : {8.0, 64 * 1024.0, 4 * kMiB, 256 * kMiB, 4 * kGiB}) {
      CAPTURE(bytes);
      for (Collective op :
           {Collective::kAllGather, Collective::kReduceScatter, Collective::kAllReduce}) {
        const double one_node = collective_cost(stock(name, 8), op, bytes).total_s();
        // Same 8 ranks, 4 per node: half the NICs per node and network hops.
        CHECK(collective_cost(stock(name, 8, 2), op, bytes).total_s() > one_node);
        CHECK(collective_cost(stock(name, 16, 2), op, bytes).total_s() > one_node);
      }
    }
  }
  // v100: 4 EDR NICs per node, busbw min(120, 4 x 12) = 48 GB/s across nodes (reference §3.1).
  CollectiveCost v = collective_cost(stock("v100", 16, 2), Collective::kAllGather, 4 * kGiB);
  CHECK(v.transfer_s == Approx(4 * kGiB * 15 / 16 / 48e9));
}

// nccl-tests' bus bandwidth of a collective of `bytes` (nccl-tests' S) on cluster `c`.
double busbw(const Cluster& c, Collective op, double bytes) {
  const double n = c.gpus;
  const double factor = op == Collective::kAllReduce ? 2 * (n - 1) / n : (n - 1) / n;
  return bytes * factor / collective_cost(c, op, bytes).total_s();
}

TEST_CASE("NCCL model across many nodes reproduces published nccl-tests figures", "[hardware]") {
  // 4 x 8 H100, 8 NDR NICs per node: 365.84 GB/s all_reduce busbw at large sizes
  // (NVIDIA/nccl-tests#309); the model: min(370, 8 x 48), Ring Simple, latency negligible.
  CHECK(busbw(stock("h100", 32, 4), Collective::kAllReduce, 16 * kGiB) ==
        Approx(365.84e9).epsilon(0.03));
  // 32 x 8 H100, 8 x 400 Gb per node: 200 GB/s all_gather busbw at 2 GiB (NVIDIA/nccl#1218).
  CHECK(busbw(stock("h100", 256, 32), Collective::kAllGather, 2 * kGiB) ==
        Approx(200e9).epsilon(0.05));
  // Per-node bandwidth never grows with the node count, for every stock multi-node profile.
  for (const char* name : {"v100", "a100", "h100"}) {
    CAPTURE(name);
    double previous = 1e300;
    for (int nodes : {2, 3, 4, 8, 16, 32, 64, 128}) {
      CAPTURE(nodes);
      const double bw = busbw(stock(name, 8 * nodes, nodes), Collective::kReduceScatter, 8 * kGiB);
      CHECK(bw <= previous * (1 + 1e-12));
      previous = bw;
    }
  }
  // Beyond the last measurement (32 nodes) the fabric efficiency is held: at 8 GiB the 64- and
  // 128-node all_gather differ only by the ring's latency, which grows with the rank count.
  const CollectiveCost a = collective_cost(stock("a100", 512, 64), Collective::kAllGather, 8 * kGiB);
  const CollectiveCost b =
      collective_cost(stock("a100", 1024, 128), Collective::kAllGather, 8 * kGiB);
  CHECK(b.latency_s > a.latency_s);
  CHECK(b.transfer_s / a.transfer_s == Approx((1023.0 / 1024) / (511.0 / 512)).epsilon(1e-9));
  // One stage-3 gather of megatron21-530b-2240 (docs/fidelity.md): 2.43 GB over 2,240 ranks on
  // 280 nodes. The ring's 2,239 steps are priced as NCCL's tuning.cc does (reference §1.4):
  // Ring/LL128, base 14 us + 1,960 NVLink steps x max(1.9, AMD net overhead 2.0) us + 279
  // network steps x 4.0 us = 5,050 us, a sixth of the gather (its transfer at 0.59 x 8 HDR NICs
  // is ~23 ms).
  const CollectiveCost g =
      collective_cost(stock("a100", 2240, 280), Collective::kAllGather, 2.433e9);
  CHECK(algo(g) == "ring/LL128");
  CHECK(g.latency_s == Approx(5050 * kUs));
  CHECK(g.transfer_s == Approx(23.3e-3).epsilon(0.02));
}

TEST_CASE("NCCL model across nodes: a ring gets the node's NICs, or with ring_nics gpu its share",
          "[hardware]") {
  // 2 x 8 A100, 8 HDR NICs of 24 GB/s: a 4 GiB all_gather runs Ring/Simple at busbw min(234.9,
  // 8 x 24) = 192 GB/s (measured 192, NVIDIA/nccl#812); transfer (n-1)/n S / busbw.
  const CollectiveCost node = collective_cost(stock("a100", 16, 2), Collective::kAllGather, 4 * kGiB);
  CHECK(node.transfer_s == Approx(4 * kGiB * 15 / 16 / 192e9));
  // Each rank its own share, 192 / 8 = 24 GB/s (Calculon's flat per-GPU model): 8x the transfer.
  Profile per_gpu = load_profile("a100");
  per_gpu.network.ring_nics = RingNics::kGpu;
  const CollectiveCost gpu =
      collective_cost(make_cluster(per_gpu, 16, 2), Collective::kAllGather, 4 * kGiB);
  CHECK(gpu.transfer_s == Approx(4 * kGiB * 15 / 16 / 24e9));
  CHECK(gpu.latency_s == Approx(node.latency_s));  // the same ring, the same steps
  // The share is flat in the node count (no fabric efficiency): on 64 nodes still 24 GB/s, where
  // the node's NICs give 0.59 x 192 = 113 GB/s (e32, docs/cost_model.md §2.3).
  const double n = 512;
  CHECK(collective_cost(make_cluster(per_gpu, 512, 64), Collective::kAllGather, 4 * kGiB)
            .transfer_s == Approx(4 * kGiB * (n - 1) / n / 24e9));
  CHECK(collective_cost(stock("a100", 512, 64), Collective::kAllGather, 4 * kGiB).transfer_s ==
        Approx(4 * kGiB * (n - 1) / n / (0.59 * 192e9)));
  // Half of each node's GPUs use the 4 NICs next to them: 96 GB/s a node, still 24 a rank.
  CHECK(ring_network_bw(per_gpu, 4, 2) == Approx(24e9));
  CHECK(ring_network_bw(load_profile("a100"), 4, 2) == Approx(96e9));
}

TEST_CASE("NCCL model: cost grows with size, LL small, Simple large", "[hardware]") {
  for (const char* name : {"v100", "a100", "h200"}) {
    for (int nodes : {1, 2, 4}) {
      const Cluster c = stock(name, 8 * nodes, nodes);
      for (Collective op :
           {Collective::kAllGather, Collective::kReduceScatter, Collective::kAllReduce}) {
        double previous = 0;
        for (double bytes = 8; bytes <= 16 * kGiB; bytes *= 2) {
          double t = collective_cost(c, op, bytes).total_s();
          CHECK(t > previous);
          previous = t;
        }
        CHECK(std::string(collective_cost(c, op, 8).protocol) == "LL");
        CHECK(std::string(collective_cost(c, op, 16 * kGiB).protocol) == "Simple");
      }
    }
  }
}

TEST_CASE("a group of one rank, or zero bytes, costs nothing", "[hardware]") {
  CollectiveCost one = collective_cost(stock("a100", 1), Collective::kAllReduce, kGiB);
  CHECK(one.total_s() == 0);
  CHECK(one.link == Link::kNone);
  CHECK(collective_cost(stock("a100", 8), Collective::kAllGather, 0).total_s() == 0);
}

TEST_CASE("a measured table wins over the model and interpolates between its points",
          "[hardware]") {
  Profile p = load_profile("a100");
  CollectiveTable t;
  t.op = Collective::kAllReduce;
  t.ranks = 8;
  t.nodes = 1;
  t.points = {{1e3, 20e-6}, {1e6, 100e-6}, {1e9, 10e-3}};
  t.regimes = {{1e6, 20e-6, 80e-12}, {1e9, 60e-6, 9.9e-12}};
  p.collectives.push_back(t);
  const Cluster c = make_cluster(p, 8, 1);

  // At a measured point: exactly the measurement.
  CollectiveCost at = collective_cost(c, Collective::kAllReduce, 1e6);
  CHECK(std::string(at.algorithm) == "table");
  CHECK(at.total_s() == 100e-6);
  CHECK(collective_cost(c, Collective::kAllReduce, 1e9).total_s() == 10e-3);
  // Halfway between 1e6 and 1e9 bytes: (100e-6 + 10e-3) / 2 = 5.05e-3 s, of which the second
  // regime's alpha 60 us is latency.
  CollectiveCost mid = collective_cost(c, Collective::kAllReduce, (1e6 + 1e9) / 2);
  CHECK(mid.total_s() == Approx(5.05e-3));
  CHECK(mid.latency_s == Approx(60e-6));
  // Beyond the last point: last regime's beta from the last point, 10e-3 + 1e9 x 9.9e-12 s.
  CHECK(collective_cost(c, Collective::kAllReduce, 2e9).total_s() == Approx(10e-3 + 9.9e-3));
  // Below the first point: the first segment extended, slope (100 - 20) us / (1e6 - 1e3) B;
  // at 500 B: 20 us - 500 x 8.008e-11 s = 19.96 us.
  CHECK(collective_cost(c, Collective::kAllReduce, 500).total_s() ==
        Approx(20e-6 - 500 * (80e-6 / 999e3)));
  // ... never below the proportional line through the origin.
  CHECK(collective_cost(c, Collective::kAllReduce, 1e-3).total_s() > 0);
  // Other groups and ops still use NCCL's model.
  CHECK(
      std::string(collective_cost(make_cluster(p, 4, 1), Collective::kAllReduce, 1e6).algorithm) ==
      "ring");
  CHECK(std::string(collective_cost(c, Collective::kAllGather, 1e6).algorithm) == "ring");
}

TEST_CASE("a one-point table without regimes scales proportionally", "[hardware]") {
  Profile p = load_profile("a100");
  CollectiveTable t;
  t.op = Collective::kAllGather;
  t.ranks = 16;
  t.nodes = 2;
  t.points = {{1e6, 1e-3}};
  p.collectives.push_back(t);
  const Cluster c = make_cluster(p, 16, 2);
  CollectiveCost cost = collective_cost(c, Collective::kAllGather, 3e6);
  CHECK(cost.total_s() == Approx(3e-3));
  CHECK(cost.link == Link::kNetwork);
  CHECK(collective_cost(c, Collective::kAllGather, 5e5).total_s() == Approx(1e-3));
}

TEST_CASE("CPU ranks over shared memory: plain alpha-beta ring", "[hardware]") {
  const Profile box = cpu_box();
  // 4 ranks, all-reduce of 1 MB: 2(4-1) = 6 steps x 20 us = 120 us; 1e6 x 6/4 / 5 GB/s = 300 us.
  CollectiveCost ar = collective_cost(make_cluster(box, 4, 1), Collective::kAllReduce, 1e6);
  CHECK(algo(ar) == "ring/");
  CHECK(ar.latency_s == Approx(120e-6));
  CHECK(ar.transfer_s == Approx(300e-6));
  // All-gather of 1 MB total: 3 x 20 us = 60 us; 1e6 x 3/4 / 5 GB/s = 150 us.
  CollectiveCost ag = collective_cost(make_cluster(box, 4, 1), Collective::kAllGather, 1e6);
  CHECK(ag.latency_s == Approx(60e-6));
  CHECK(ag.transfer_s == Approx(150e-6));
  // 2 nodes x 4: 14 steps, 2(2-1) = 2 of them cross the network: 12 x 20 + 2 x 50 = 340 us;
  // busbw min(5, 1 NIC x 1.25) GB/s: 1e6 x 14/8 / 1.25 GB/s = 1.4 ms.
  CollectiveCost two = collective_cost(make_cluster(box, 8, 2), Collective::kAllReduce, 1e6);
  CHECK(two.latency_s == Approx(340e-6));
  CHECK(two.transfer_s == Approx(1.4e-3));
  CHECK(two.link == Link::kNetwork);
}

TEST_CASE("GEMM efficiency curve and roofline", "[hardware]") {
  const GpuSpec a100 = load_profile("a100").gpu;
  // Curve points: 1e8 -> 0.087, 1e9 -> 0.304, 1e10 -> 0.652, ..., 1e12 -> 0.869.
  CHECK(gemm_efficiency(a100, 1e9) == Approx(0.304));
  CHECK(gemm_efficiency(a100, std::pow(10.0, 9.5)) == Approx((0.304 + 0.652) / 2));
  CHECK(gemm_efficiency(a100, 1e3) == Approx(0.087));
  CHECK(gemm_efficiency(a100, 0) == Approx(0.087));
  CHECK(gemm_efficiency(a100, 1e18) == Approx(0.869));

  // 8192^3 bf16: 2 x 8192^3 = 1.0995e12 FLOPs at 312 TFLOP/s x 0.869 = 4.055 ms, against
  // 2 B x 3 x 8192^2 = 403 MB at 2039 GB/s x 0.85 = 0.232 ms: compute-bound, + 4 us launch.
  const double flops = 2 * std::pow(8192.0, 3);
  CHECK(gemm_time_s(a100, 8192, 8192, 8192, 2) == Approx(flops / (312e12 * 0.869) + 4e-6));
  // GEMV 1 x 8192 x 8192: 2 x (8192 + 8192^2 + 8192) B at 1733 GB/s = 77.5 us, compute ~4 us.
  const double bytes = 2 * (8192 + 8192.0 * 8192 + 8192);
  CHECK(gemm_time_s(a100, 1, 8192, 8192, 2) == Approx(bytes / (2039e9 * 0.85) + 4e-6));
  // fp32 runs at the fp32 peak, 19.5 TFLOP/s.
  const double f32 = 2 * std::pow(4096.0, 3);
  CHECK(gemm_time_s(a100, 4096, 4096, 4096, 4) ==
        Approx(f32 / (19.5e12 * gemm_efficiency(a100, f32)) + 4e-6));
  CHECK(gemm_time_s(a100, 0, 8192, 8192, 2) == 0);

  // A cpu device only has its fp32 rate, whatever the dtype: 2 x 1024^3 at 1e11 x efficiency.
  const GpuSpec cpu = cpu_box().gpu;
  const double f = 2 * std::pow(1024.0, 3);
  CHECK(gemm_time_s(cpu, 1024, 1024, 1024, 2) ==
        Approx(f / (1e11 * gemm_efficiency(cpu, f)) + cpu.kernel_launch_s));

  // Memory-bound kernel: 1 GB at 2039 GB/s x 0.85, + launch.
  CHECK(memory_bound_time_s(a100, 1e9) == Approx(1e9 / (2039e9 * 0.85) + 4e-6));
  CHECK(memory_bound_time_s(a100, 0) == 0);
}

TEST_CASE("host copies, NVMe and CPU Adam closed forms", "[hardware]") {
  const NodeSpec a100 = load_profile("a100").node;
  CHECK(h2d_time_s(a100, 1e9, true, 1) == Approx(1e9 / 25.1e9));
  CHECK(h2d_time_s(a100, 1e9, false, 1) == Approx(1e9 / 13.8e9));
  CHECK(d2h_time_s(a100, 1e9, true, 1) == Approx(1e9 / 25.1e9));
  CHECK(d2h_time_s(a100, 0, true, 1) == 0);
  // DGX A100: two GPUs under each PCIe switch share its 24 GB/s uplink once both copy (two or
  // more ranks on the node); a direct-attached GPU (a100-pcie: one per switch) keeps its own.
  CHECK(pcie_uplink_share(a100, 8) == Approx(12e9));
  CHECK(h2d_time_s(a100, 1e9, true, 2) == Approx(1e9 / 12e9));
  CHECK(d2h_time_s(a100, 1e9, true, 8) == Approx(1e9 / 12e9));
  CHECK(h2d_time_s(a100, 1e9, false, 8) == Approx(1e9 / 12e9));
  const NodeSpec pcie = load_profile("a100-pcie").node;
  CHECK(h2d_time_s(pcie, 1e9, true, 8) == Approx(1e9 / 25.1e9));
  // The node's 18 GB/s read / 9 GB/s write split among 8 ranks.
  CHECK(nvme_read_time_s(a100, 1e9, 8) == Approx(1e9 / (18e9 / 8)));
  CHECK(nvme_write_time_s(a100, 1e9, 8) == Approx(1e9 / (9e9 / 8)));
  CHECK(nvme_read_time_s(a100, 1e9, 0) == Approx(1e9 / 18e9));

  // 1e9 params, 16 threads at the AVX2 EPYC's 30 M/s = 0.48e9 /s; DRAM share 280 GB/s / 8 / 28 B
  // = 1.25e9 /s: core-bound, 2.083 s.
  CHECK(cpu_adam_time_s(a100, 1e9, 16, 8) == Approx(1e9 / 0.48e9));
  // 64 threads: 1.92e9 /s of cores against the same 1.25e9 /s of DRAM: memory-bound, 0.8 s.
  CHECK(cpu_adam_time_s(a100, 1e9, 64, 8) == Approx(1e9 / (280e9 / 8 / 28)));
  // v100 node (Broadwell, AVX2), 10 threads per rank, 8 ranks: 0.3e9 /s of cores, 100 GB/s / 8 /
  // 28 B = 0.446e9 /s of DRAM: core-bound, 3.33 s.
  const NodeSpec v100 = load_profile("v100").node;
  CHECK(cpu_adam_time_s(v100, 1e9, 10, 8) == Approx(1e9 / 0.3e9));
  // An AVX-512 host's 60 M/s a core: the h100 node's 14 threads per rank of 8, 0.84e9 /s.
  CHECK(cpu_adam_time_s(load_profile("h100").node, 1e9, 14, 8) == Approx(1e9 / 0.84e9));
  CHECK(cpu_adam_time_s(v100, 0, 10, 8) == 0);
}

TEST_CASE("framework terms: host dispatch floor and step overhead, none on a cpu device",
          "[hardware]") {
  Profile p = load_profile("h100");
  p.framework.host_op_s = 10e-6;
  p.framework.step_overhead_s = 0.2;
  CHECK(host_dispatch_s(p, 300) == Approx(3e-3));
  CHECK(host_dispatch_s(p, 0) == 0);
  CHECK(step_overhead_s(p) == Approx(0.2));
  p.framework.stage3_fetch_s = 800e-6;
  CHECK(stage3_hook_s(p, 3) == Approx(2.4e-3));
  CHECK(stage3_hook_s(p, 0) == 0);
  Profile cpu = cpu_box();
  cpu.framework = p.framework;
  CHECK(host_dispatch_s(cpu, 300) == 0);
  CHECK(step_overhead_s(cpu) == 0);
  CHECK(stage3_hook_s(cpu, 3) == 0);
}

TEST_CASE("framework terms: oversubscribed CPU Adam and pageable copies sharing host DRAM",
          "[hardware]") {
  Profile p = load_profile("a100");  // 128 cores, 280 GB/s, 30 M params/s per core (AVX2)
  p.framework.cpu_oversubscription_efficiency = 0.5;
  // One rank per node: all cores, no oversubscription: as cpu_adam_time_s.
  CHECK(offload_cpu_adam_time_s(p, 1e9, 1) == Approx(cpu_adam_time_s(p.node, 1e9, 128, 1)));
  // 8 ranks: 16 cores each at half: 8 x 30 M/s = 0.24e9 /s against 1.25e9 /s of DRAM.
  CHECK(offload_cpu_adam_time_s(p, 1e9, 8) == Approx(1e9 / 0.24e9));
  // Efficiency 1: the plain fair share, as cpu_adam_time_s.
  p.framework.cpu_oversubscription_efficiency = 1;
  CHECK(offload_cpu_adam_time_s(p, 1e9, 8) == Approx(cpu_adam_time_s(p.node, 1e9, 16, 8)));
  CHECK(offload_cpu_adam_time_s(p, 0, 8) == 0);
  // OMP_NUM_THREADS (FrameworkSpec::omp_num_threads), at efficiency 0.5 for the oversubscribed
  // case: torchrun's 1 gives each of 8 ranks one thread, 30 M params/s: 1e9 / 30e6 s.
  p.framework.cpu_oversubscription_efficiency = 0.5;
  p.framework.omp_num_threads = 1;
  CHECK(offload_cpu_adam_time_s(p, 1e9, 8) == Approx(1e9 / 30e6));
  // --bind_cores_to_rank's 128 / 8 = 16: 16 threads, no oversubscription loss.
  p.framework.omp_num_threads = 16;
  CHECK(offload_cpu_adam_time_s(p, 1e9, 8) == Approx(1e9 / (16 * 30e6)));
  // 64 threads x 8 ranks > 128 cores: oversubscribed again, the fair share at 0.5.
  p.framework.omp_num_threads = 64;
  CHECK(offload_cpu_adam_time_s(p, 1e9, 8) == Approx(1e9 / 0.24e9));
  p.framework.omp_num_threads = 0;
  p.framework.cpu_oversubscription_efficiency = 1;
  // Pageable: one rank alone at its 13.8 GB/s; 8 ranks at 280 / (3 x 8) = 11.7 GB/s each.
  CHECK(pageable_copy_time_s(p, 1e9, true, 1) == Approx(1e9 / 13.8e9));
  CHECK(pageable_copy_time_s(p, 1e9, false, 8) == Approx(1e9 / (280e9 / 24)));
  CHECK(pageable_copy_time_s(p, 0, true, 8) == 0);
}

}  // namespace
}  // namespace zplan::hardware
