// ZeRO++ (hpZ, qwZ, qgZ) and MiCS: groups, volumes, memory and the simulated step.
#include <string>

#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "models/catalog.h"
#include "sim/memory_model.h"
#include "sim/simulate.h"
#include "sim/zeropp_mics.h"
#include "tests/sim/sim_test_util.h"

namespace zplan::sim {
namespace {

using testing::config;
using testing::ideal_cluster;

std::string z3(const std::string& extra) {
  return R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
             "bf16": {"enabled": true}, "zero_optimization": {"stage": 3)" +
         extra + "}}";
}

TEST_CASE("ZeRO++ and MiCS groups follow DeepSpeed's rank layout", "[sim]") {
  const hardware::Cluster cl = ideal_cluster(512, 64);
  ZeroGroups g = zero_groups(config(z3(R"(, "zero_hpz_partition_size": 8,
      "zero_quantized_gradients": true)"), 512).zero, cl);
  CHECK(g.secondary.ranks == 8);
  CHECK(g.secondary.nodes == 1);
  CHECK(g.partition.ranks == 512);
  CHECK(g.qgz);
  CHECK(g.node.ranks == 8);
  CHECK(g.across_nodes.ranks == 64);
  CHECK(g.across_nodes.nodes == 64);

  g = zero_groups(config(z3(R"(, "mics_shard_size": 32,
      "mics_hierarchical_params_gather": true)"), 512).zero, cl);
  CHECK(g.partition.ranks == 32);
  CHECK(g.partition.nodes == 4);
  CHECK(g.replica.ranks == 16);
  CHECK(g.replica.nodes == 16);  // one member per node: the shard holds whole nodes
  CHECK(g.hierarchical);
  CHECK(g.shard_inter.ranks == 4);
  CHECK(g.shard_intra.ranks == 8);
  // A shard inside a node: its replicas share nodes.
  g = zero_groups(config(z3(R"(, "mics_shard_size": 4)"), 512).zero, cl);
  CHECK(g.replica.ranks == 128);
  CHECK(g.replica.nodes == 64);
  CHECK_FALSE(g.hierarchical);
  // qgZ does nothing on one node (stage3.py __avg_scatter_grads).
  CHECK_FALSE(zero_groups(config(z3(R"(, "zero_quantized_gradients": true)"), 8).zero,
                          ideal_cluster(8))
                  .qgz);
}

TEST_CASE("a group sharing the node's NICs gets its share of them", "[sim]") {
  const hardware::Cluster cl = ideal_cluster(64, 8);
  const double bytes = 1e9;
  // One rank per node in each of 8 concurrent groups: each gets 1/8 of the node's 8 NICs, i.e.
  // one NIC -- the same as the cost model gives a lone rank here, so no change.
  hardware::CollectiveCost one = group_collective_cost(cl, hardware::Collective::kAllGather,
                                                       bytes, CommGroup{8, 8});
  hardware::Cluster lone = cl;
  lone.gpus = 8;
  lone.nodes = 8;
  CHECK(one.transfer_s ==
        Approx(hardware::collective_cost(lone, hardware::Collective::kAllGather, bytes)
                   .transfer_s));
  // With 2 NICs per node, 8 groups share 2 NICs: each gets a quarter NIC, not a whole one.
  hardware::Cluster two_nics = cl;
  two_nics.profile.network.nics_per_node = 2;
  hardware::Cluster lone2 = two_nics;
  lone2.gpus = 8;
  lone2.nodes = 8;
  const double alone =
      hardware::collective_cost(lone2, hardware::Collective::kAllGather, bytes).transfer_s;
  CHECK(group_collective_cost(two_nics, hardware::Collective::kAllGather, bytes, CommGroup{8, 8})
            .transfer_s == Approx(4 * alone));
}

TEST_CASE("inter-node volume: hpZ -1/3, qwZ halves gathers, qgZ quarters the reduction",
          "[sim]") {
  const hardware::Cluster cl = ideal_cluster(512, 64);
  const models::Model m = models::load_model("20b");
  auto volume = [&](const std::string& extra, int gas = 1) {
    DsConfig c = config(z3(extra), 512);
    return stage3_comm_volume(c.zero, cl, zero_sizes(m, 512, c), gas).inter_node;
  };
  const ZeroSizes s = zero_sizes(m, 512, config(z3(""), 512));
  const double np = s.non_persistent, psi = s.psi;
  const double plain = volume("");
  // 3 units of (k-1)/k * 2 bytes * elements / g: two gathers and a reduction.
  CHECK(plain == Approx(63.0 / 64 * 2 * (2 * np + psi) / 8));
  CHECK(volume(R"(, "zero_hpz_partition_size": 8)") == Approx(63.0 / 64 * 2 * (np + psi) / 8));
  // Later micro-steps gather only from the secondary partition.
  CHECK(volume(R"(, "zero_hpz_partition_size": 8)", 4) ==
        Approx(63.0 / 64 * 2 * (np + 4 * psi) / 8));
  CHECK(volume(R"(, "zero_quantized_weights": true)") ==
        Approx(63.0 / 64 * (2 * (1 + kQwzScaleBytesPerElem) * np + 2 * psi) / 8));
  CHECK(volume(R"(, "zero_quantized_gradients": true)") ==
        Approx(63.0 / 64 * (2 * 2 * np + 0.5 * psi) / 8));
  // All three: ZeRO++'s 4x less (0.75 of 3 units), up to the persistent parameters.
  const double all = volume(R"(, "zero_hpz_partition_size": 8, "zero_quantized_weights": true,
                               "zero_quantized_gradients": true)");
  CHECK(all / plain == Approx(0.25).epsilon(0.01));
  // MiCS with shards of one node: nothing crosses nodes but the replica all-reduce.
  const DsConfig mc = config(z3(R"(, "mics_shard_size": 8)"), 512);
  const ZeroSizes ms = zero_sizes(m, 512, mc);
  CHECK(ms.dp == 8);
  CHECK(volume(R"(, "mics_shard_size": 8)") == Approx(2 * 63.0 / 64 * 2 * ms.partition));
}

TEST_CASE("hpZ keeps a secondary partition, MiCS partitions over the shard", "[sim]") {
  const hardware::Cluster cl = ideal_cluster(64, 8);
  const models::Model m = models::load_model("20b");
  const Workload w;
  const DsConfig plain = config(z3(""), 64);
  const DsConfig hpz = config(z3(R"(, "zero_hpz_partition_size": 8)"), 64);
  const ZeroSizes s = zero_sizes(m, 64, plain);
  auto params16 = [&](const DsConfig& c) {
    return persistent_memory(zero_sizes(m, 64, c), cl, c)[0][Category::kParams16];
  };
  CHECK(params16(hpz) - params16(plain) == Approx(2 * s.non_persistent / 8));
  const DsConfig mics = config(z3(R"(, "mics_shard_size": 16)"), 64);
  const ZeroSizes ms = zero_sizes(m, 64, mics);
  CHECK(ms.partition == Approx(4 * s.partition).epsilon(0.001));
  const MemoryReport mp = analyze_memory(m, cl, plain, w);
  const MemoryReport mm = analyze_memory(m, cl, mics, w);
  CHECK(mm.gpu_model_state_bytes == Approx(4 * mp.gpu_model_state_bytes).epsilon(0.01));
}

TEST_CASE("ZeRO++ and MiCS shorten a network-bound ZeRO-3 step", "[sim]") {
  // 20B on 8 nodes with a slow network: ZeRO-3's gathers are exposed.
  hardware::Cluster cl = ideal_cluster(64, 8);
  cl.profile.network.nic_bw_bytes_per_s = 1e9;
  const models::Model m = models::load_model("20b");
  Workload w;
  w.seq_len = 512;
  auto step = [&](const std::string& extra) {
    const DsConfig c = config(z3(extra), 64, m.shape().hidden);
    return simulate_step(m, cl, c, w);
  };
  const StepResult plain = step("");
  const StepResult hpz = step(R"(, "zero_hpz_partition_size": 8)");
  const StepResult all = step(R"(, "zero_hpz_partition_size": 8, "zero_quantized_weights": true,
                                 "zero_quantized_gradients": true)");
  const StepResult mics = step(R"(, "mics_shard_size": 8)");
  CHECK(hpz.step_time_s < plain.step_time_s);
  CHECK(all.step_time_s < hpz.step_time_s);
  CHECK(mics.step_time_s < plain.step_time_s);
  // Fewer bytes on the wire per rank: qwZ and qgZ quantize them.
  CHECK(all.wire_bytes < hpz.wire_bytes);
  // hpZ's secondary partition shows in the simulated peak too.
  CHECK(hpz.peak_bytes[0] > plain.peak_bytes[0]);
}

TEST_CASE("ZeRO++ and MiCS checks that need the node size", "[sim]") {
  const hardware::Cluster cl = ideal_cluster(48, 6);
  CHECK_THROWS_WITH(
      check_zeropp_mics_cluster(config(z3(R"(, "mics_shard_size": 8,
          "mics_hierarchical_params_gather": true)"), 48).zero, cl, "c.json"),
      Catch::Contains("c.json: /zero_optimization/mics_hierarchical_params_gather: needs shards "
                      "spanning more than one node"));
  CHECK_THROWS_WITH(
      check_zeropp_mics_cluster(config(z3(R"(, "zero_hpz_partition_size": 12)"), 48).zero, cl,
                                "c.json"),
      Catch::Contains("zero_hpz_partition_size: not modelled: hpZ groups of 12 consecutive "
                      "ranks split nodes of 8 GPUs"));
  CHECK_THROWS_WITH(
      check_zeropp_mics_cluster(config(z3(R"(, "mics_shard_size": 12)"), 48).zero, cl, "c.json"),
      Catch::Contains("mics_shard_size: not modelled: MiCS shards of 12"));
  CHECK_NOTHROW(check_zeropp_mics_cluster(
      config(z3(R"(, "mics_shard_size": 16, "mics_hierarchical_params_gather": true)"), 48).zero,
      cl, "c.json"));
  // Groups smaller than a node that do not divide it: 12 ranks on 2 nodes of 6 in groups of 4
  // are ranks 0-3 (node 0), 4-7 (two on each node), 8-11 (node 1) -- DeepSpeed's consecutive
  // groups, which zero_groups would price as if all were inside a node. The trial's
  // n12_mics4.json and hpz4.json.
  const hardware::Cluster twelve = ideal_cluster(12, 2);
  CHECK_THROWS_WITH(
      check_zeropp_mics_cluster(config(z3(R"(, "mics_shard_size": 4)"), 12).zero, twelve,
                                "n12_mics4.json"),
      "n12_mics4.json: /zero_optimization/mics_shard_size: not modelled: MiCS shards of 4 "
      "consecutive ranks split nodes of 6 GPUs (some span two nodes); use a divisor or a "
      "multiple of 6");
  CHECK_THROWS_WITH(
      check_zeropp_mics_cluster(config(z3(R"(, "zero_hpz_partition_size": 4)"), 12).zero, twelve,
                                "hpz4.json"),
      Catch::Contains("hpz4.json: /zero_optimization/zero_hpz_partition_size: not modelled: hpZ "
                      "groups of 4 consecutive ranks split nodes of 6 GPUs"));
  // Divisors and multiples of the node are modelled; hpZ above the world is one group of all.
  for (const char* ok : {R"(, "zero_hpz_partition_size": 2)", R"(, "zero_hpz_partition_size": 3)",
                         R"(, "zero_hpz_partition_size": 6)", R"(, "zero_hpz_partition_size": 12)",
                         R"(, "zero_hpz_partition_size": 1024)", R"(, "mics_shard_size": 6)",
                         R"(, "mics_shard_size": 3)", R"(, "mics_shard_size": 12)"}) {
    INFO(ok);
    CHECK_NOTHROW(check_zeropp_mics_cluster(config(z3(ok), 12).zero, twelve, "c.json"));
  }
  CHECK(groups_split_nodes("groups", 4, 6) != "");
  CHECK(groups_split_nodes("groups", 9, 6) != "");  // 0-8 is a node and a half
  CHECK(groups_split_nodes("groups", 1, 6) == "");
  CHECK(groups_split_nodes("groups", 6, 6) == "");
  CHECK(groups_split_nodes("groups", 18, 6) == "");
  CHECK(zeropp_mics_note(config(z3(R"(, "zero_quantized_gradients": true)"), 8).zero,
                         ideal_cluster(8))
            .find("no effect on one node") != std::string::npos);
}

}  // namespace
}  // namespace zplan::sim
