// What the text output says about ZeRO++ and MiCS and about exposed communication: the settings
// in simulate's and memory's header, knob line and sweep's table; the note for keys DeepSpeed
// does not read; the refusal of groups that split a node; and which "exposed" is which.
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace zplan::testing {
namespace {

// The stock A100 profile with one 100 Gb/s NIC per node: ZeRO-3 is network-bound there, so the
// planner's ZeRO++ and MiCS variants win and stay in a sweep.
std::string thin_a100() {
  nlohmann::json j =
      nlohmann::json::parse(slurp(std::string(ZPLAN_SOURCE_DIR) + "/hardware/a100.json"));
  j["network"]["nics_per_node"] = 1;
  j["network"]["nic_gbps"] = 12.5;
  return j.dump();
}

TEST_CASE("memory and simulate name ZeRO++ and MiCS in the header and the knob line", "[cli]") {
  TempFile zpp(ds_config(R"("stage": 3, "zero_hpz_partition_size": 8,
                            "zero_quantized_weights": true, "zero_quantized_gradients": true)"),
               "zpp.json");
  TempFile mics(ds_config(R"("stage": 3, "mics_shard_size": 16,
                             "mics_hierarchical_params_gather": true)"),
                "mics.json");
  TempFile plain(ds_config(R"("stage": 3)"), "plain.json");
  for (const char* cmd : kSetupCommands) {
    INFO(cmd);
    const std::string run = std::string(cmd) + " --model 1.3b --gpus 32 --nodes 4 --hw a100 " +
                            "--seq-len 1024 --ds-config ";
    RunResult r = run_zplan(run + zpp.path);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("\n  ZeRO-3 + ZeRO++ (hpZ 8, qwZ, qgZ), offload optimizer none, params "
                     "none, bf16") != std::string::npos);
    CHECK(r.out.find(", sub_group_size 1e9, zero_hpz_partition_size 8, zero_quantized_weights "
                     "true, zero_quantized_gradients true\n") != std::string::npos);
    r = run_zplan(run + mics.path);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("\n  ZeRO-3 + MiCS (shard 16, hierarchical), offload optimizer none") !=
          std::string::npos);
    CHECK(r.out.find(", sub_group_size 1e9, mics_shard_size 16, "
                     "mics_hierarchical_params_gather true\n") != std::string::npos);
    // A plain ZeRO-3 config prints as before.
    r = run_zplan(run + plain.path);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("\n  ZeRO-3, offload optimizer none, params none, bf16") != std::string::npos);
    CHECK(r.out.find(", sub_group_size 1e9\n") != std::string::npos);
    CHECK(r.out.find("ZeRO++") == std::string::npos);
    CHECK(r.out.find("mics") == std::string::npos);
  }
}

TEST_CASE("ZeRO++ and MiCS keys below stage 3 get offload_param's note and change nothing",
          "[cli]") {
  // The trial's hpz_stage2.json: DeepSpeed reads these keys in stage 3's code only.
  TempFile hpz(ds_config(R"("stage": 2, "zero_hpz_partition_size": 8,
                            "zero_quantized_gradients": true)"),
               "hpz_stage2.json");
  TempFile z2(ds_config(R"("stage": 2)"), "z2.json");
  const std::string run =
      "simulate --model 1.3b --gpus 32 --nodes 4 --hw a100 --seq-len 1024 "
      "--ds-config ";
  RunResult r = run_zplan(run + hpz.path);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("zplan: note: " + hpz.path +
                   ": /zero_optimization/zero_hpz_partition_size is 8, which DeepSpeed reads "
                   "only at ZeRO stage 3: ignored at stage 2, as DeepSpeed ignores it\n") !=
        std::string::npos);
  CHECK(r.err.find(": /zero_optimization/zero_quantized_gradients is true, which DeepSpeed "
                   "reads only at ZeRO stage 3: ignored at stage 2") != std::string::npos);
  // The step is plain ZeRO-2's, to the byte below the setup lines.
  RunResult plain = run_zplan(run + z2.path);
  REQUIRE(plain.exit_code == 0);
  auto body = [](const std::string& out) { return out.substr(out.find("\n\n")); };
  CHECK(body(r.out) == body(plain.out));
}

TEST_CASE("hpZ groups and MiCS shards that split a node are refused as not modelled", "[cli]") {
  // The trial's n12_mics4.json and hpz4.json: 12 GPUs on 2 nodes of 6, groups of 4 consecutive
  // ranks -- ranks 4-7 sit two on each node.
  TempFile mics4(ds_config(R"("stage": 3, "mics_shard_size": 4)"), "n12_mics4.json");
  TempFile hpz4(ds_config(R"("stage": 3, "zero_hpz_partition_size": 4)"), "hpz4.json");
  const std::string run =
      "simulate --model 1.3b --gpus 12 --nodes 2 --hw a100 --checkpointing "
      "full --ds-config ";
  expect_one_line_error(run_zplan(run + mics4.path), 1,
                        "/zero_optimization/mics_shard_size: not modelled: MiCS shards of 4 "
                        "consecutive ranks split nodes of 6 GPUs");
  expect_one_line_error(run_zplan(run + hpz4.path), 1,
                        "/zero_optimization/zero_hpz_partition_size: not modelled: hpZ groups "
                        "of 4 consecutive ranks split nodes of 6 GPUs");
  // Shards of a divisor of the node run.
  TempFile mics3(ds_config(R"("stage": 3, "mics_shard_size": 3)"), "n12_mics3.json");
  CHECK(run_zplan(run + mics3.path).exit_code == 0);
}

TEST_CASE("simulate says the critical path where it means it, and exposed where it means that",
          "[cli]") {
  // The trial's mics16_h.json case, smaller: the reduce stream is on the critical path far
  // longer than it runs with compute idle.
  TempFile mics(ds_config(R"("stage": 3, "mics_shard_size": 16,
                             "mics_hierarchical_params_gather": true)"),
                "mics16_h.json");
  RunResult r = run_zplan(
      "simulate --model 1.3b --gpus 32 --nodes 4 --hw a100 --seq-len 1024 "
      "--checkpointing full --ds-config " +
      mics.path);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("\n  critical path    ") != std::string::npos);
  CHECK(r.out.find(" of the step\n  verdict  ") != std::string::npos);
  CHECK(r.out.find("time goes to") == std::string::npos);
  CHECK(r.out.find("exposed gradient reduction") == std::string::npos);
  CHECK(r.out.find("exposed all-gather") == std::string::npos);
  CHECK(r.out.find("\n  (exposed: ran while the compute stream was idle; the critical path above "
                   "counts each task the step waited on whole, overlapped or not)\n") !=
        std::string::npos);
  // The JSON keeps both measures under their own names.
  RunResult j = run_zplan(
      "simulate --json --model 1.3b --gpus 32 --nodes 4 --hw a100 "
      "--seq-len 1024 --checkpointing full --ds-config " +
      mics.path);
  REQUIRE(j.exit_code == 0);
  const nlohmann::json result = nlohmann::json::parse(j.out)["result"];
  CHECK(result["resources"]["reduce stream"].contains("exposed_s"));
  CHECK(result["bottleneck"].get<std::string>().find("exposed") == std::string::npos);
}

TEST_CASE("sweep's table tells ZeRO++ and MiCS rows apart", "[cli]") {
  TempFile hw(thin_a100(), "a100-thin.json");
  const std::string grid =
      " --seq-len 1024 --stage 3 --offload-optimizer none --offload-param "
      "none --micro-batch 1 --checkpointing full --reduce-bucket 5e8 "
      "--prefetch-bucket 5e7 --persistence-threshold 1e5";
  RunResult r = run_zplan("sweep --model 6.7b --gpus 32 --nodes 4 --hw " + hw.path + grid);
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("ZeRO++ / MiCS") != std::string::npos);
  CHECK((r.out.find("ZeRO++ (hpZ") != std::string::npos ||
         r.out.find("MiCS (shard") != std::string::npos));
  // One node has no variants, and no such column.
  RunResult one = run_zplan("sweep --model 1.3b --gpus 8 --hw a100" + grid);
  REQUIRE(one.exit_code == 0);
  CHECK(one.out.find("ZeRO++") == std::string::npos);
}

}  // namespace
}  // namespace zplan::testing
