// `zplan` / `zplan plan` / `zplan sweep` as a user runs them: exit codes, one-line errors,
// ds_config.json written once (never overwritten without --force), byte-identical sweeps
// whatever the thread count.
#include <catch2/catch.hpp>

#ifdef ZPLAN_BINARY

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "sim/ds_config/zero_config.h"
#include "tests/cli/cli_test_util.h"

namespace zplan::testing {
namespace {

// A fresh temporary directory, removed (with the files tests put there) at scope end.
struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/zplan-plan-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string file(const std::string& name) const { return path + "/" + name; }
  std::string path;
};

// Small searches: fast, and enough to exercise the commands end to end.
const std::string kSmall = "--model 1.3b --gpus 8 --hw a100-40g --micro-batch 1,4 ";

TEST_CASE("plain zplan plans, writes ds_config.json once, and refuses to overwrite it",
          "[planner][cli]") {
  TempDir dir;
  const std::string out = dir.file("ds_config.json");
  RunResult r = run_zplan(kSmall + "--out " + out);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find("recommended: ZeRO-") != std::string::npos);
  CHECK(r.out.find("why it wins") != std::string::npos);
  CHECK(r.out.find("alternatives:") != std::string::npos);
  REQUIRE(path_exists(out));
  sim::ParseContext context;
  context.dp_world_size = 8;
  sim::DsConfig c = sim::load_ds_config(out, context);
  CHECK(c.train_batch_size == c.micro_batch * c.gradient_accumulation_steps * 8);
  const std::string before = slurp(out);
  expect_one_line_error(run_zplan(kSmall + "--out " + out), 1, "exists; pass --force");
  CHECK(slurp(out) == before);
  CHECK(run_zplan(kSmall + "--out " + out + " --force").exit_code == 0);
  // The subcommand form is the same command.
  CHECK(run_zplan("plan " + kSmall + "--out " + dir.file("b.json")).exit_code == 0);
  CHECK(slurp(dir.file("b.json")) == before);
}

TEST_CASE("plan prints the launch lines and --out-format hf writes the Trainer's form",
          "[planner][cli]") {
  TempDir dir;
  RunResult r = run_zplan("plan " + kSmall + "--json --out " + dir.file("d.json"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json rec = nlohmann::json::parse(r.out)["recommended"];
  const nlohmann::json& ds = rec["ds_config"];
  CHECK(rec["ds_config_format"] == "deepspeed");
  CHECK(rec["launch"]["deepspeed"] ==
        "deepspeed --num_gpus 8 train.py --deepspeed --deepspeed_config " + dir.file("d.json"));
  // The Trainer's flags are the file's batch split, precision and clipping.
  const std::string trainer = rec["launch"]["hf_trainer"];
  CHECK(trainer.find("--per_device_train_batch_size " +
                     std::to_string(ds["train_micro_batch_size_per_gpu"].get<long long>()) +
                     " --gradient_accumulation_steps " +
                     std::to_string(ds["gradient_accumulation_steps"].get<long long>()) +
                     " --bf16 --max_grad_norm 1.0") != std::string::npos);
  CHECK(ds["optimizer"]["params"]["lr"] == 5e-5);
  r = run_zplan("plan " + kSmall + "--out-format hf --out " + dir.file("hf.json"));
  REQUIRE(r.exit_code == 0);
  const nlohmann::json hf = nlohmann::json::parse(slurp(dir.file("hf.json")));
  CHECK(hf["optimizer"]["params"]["lr"] == "auto");
  CHECK(r.out.find("--deepspeed --deepspeed_config") == std::string::npos);  // no plain script
  CHECK(r.out.find("launch a Hugging Face Trainer script") != std::string::npos);
  expect_one_line_error(run_zplan("plan " + kSmall + "--out-format yaml --out " +
                                  dir.file("y.json")),
                        1, "zplan: --out-format: must be deepspeed or hf, got \"yaml\"");
  CHECK_FALSE(path_exists(dir.file("y.json")));
}

TEST_CASE("zplan plan --json and --report", "[planner][cli]") {
  TempDir dir;
  RunResult r = run_zplan("plan " + kSmall + "--json --out " + dir.file("d.json") + " --report " +
                          dir.file("r.html"));
  REQUIRE(r.exit_code == 0);
  nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["recommended"]["ds_config"]["train_batch_size"] == j["batch"]["global_batch"]);
  CHECK(j["search"]["generated"].get<int>() > 0);
  CHECK(j["alternatives"].is_array());
  std::string html = slurp(dir.file("r.html"));
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("Timeline of one rank") != std::string::npos);
}

TEST_CASE("nothing fits: exit 3, the nearest miss and what would fit", "[planner][cli]") {
  TempDir dir;
  RunResult r = run_zplan(
      "--model 175b --gpus 8 --hw a100 --offload-optimizer none "
      "--offload-param none --micro-batch 1 --out " +
      dir.file("x.json"));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 3);
  CHECK(r.out.find("NOTHING FITS") != std::string::npos);
  CHECK(r.out.find("more GPUs") != std::string::npos);
  CHECK(r.out.find("offload") != std::string::npos);
  CHECK_FALSE(path_exists(dir.file("x.json")));
}

TEST_CASE("without --precision, GPUs that have no bf16 (V100) are planned in fp16",
          "[planner][cli]") {
  const std::string v100 = "sweep --model 125m --gpus 8 --hw v100 --stage 2 --micro-batch 1 ";
  RunResult r = run_zplan(v100 + "--json");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(nlohmann::json::parse(r.out)["workload"]["precision"] == "fp16");
  // An explicit bf16 is refused: V100 has no bf16 tensor cores, so its fp16 rate would make every
  // time several times too short. So is a ds_config that enables bf16.
  for (const std::string& cmd : {v100, std::string("plan --model 125m --gpus 8 --hw v100 "),
                                 std::string("simulate --model 125m --gpus 8 --hw v100 ")}) {
    expect_one_line_error(run_zplan(cmd + "--precision bf16"), 1,
                          "--precision: bf16 on V100-SXM2-32GB, which has no bf16 tensor cores");
  }
  expect_one_line_error(
      run_zplan("memory --model 125m --gpus 8 --hw v100 --ds-config examples/ds_configs/zero2.json"),
      1, "examples/ds_configs/zero2.json: /bf16: bf16 on V100-SXM2-32GB");
  RunResult a100 = run_zplan("sweep --model 125m --gpus 8 --hw a100 --stage 2 --micro-batch 1 --json");
  REQUIRE(a100.exit_code == 0);
  CHECK(nlohmann::json::parse(a100.out)["workload"]["precision"] == "bf16");
  // The single-config commands follow the same default.
  RunResult memory = run_zplan("memory --model 125m --gpus 8 --hw v100 --stage 2 --json");
  REQUIRE(memory.exit_code == 0);
  CHECK(nlohmann::json::parse(memory.out)["ds_config"]["fp16"]["enabled"] == true);
}

TEST_CASE("plan says small shortfalls in MiB and refuses an infinite --offload-margin",
          "[planner][cli]") {
  // Llama-2-70B on 64 V100s without offload at 4200 tokens misses by 71 MiB: it said "OOM by
  // 0.1 GiB".
  RunResult r = run_zplan(
      "--model llama2-70b --gpus 64 --nodes 8 --hw v100 --offload-optimizer none "
      "--offload-param none --seq-len 4200 --json --force --out /tmp/zplan-cli-plan-test-ds.json");
  CHECK(r.exit_code == 3);  // nothing fits: nothing written
  CHECK(r.out.find("OOM by 71 MiB on GPU") != std::string::npos);
  expect_one_line_error(
      run_zplan("--model 13b --gpus 8 --hw a100-40g --offload-margin inf --out x.json"), 1,
      "--offload-margin: must be a fraction >= 0, got inf");
  expect_one_line_error(
      run_zplan("--model 13b --gpus 8 --hw a100-40g --lossy-margin -0.1 --out x.json"), 1,
      "--lossy-margin: must be a fraction >= 0, got -0.1");
  for (const char* cmd : {"plan", "sweep"}) {
    expect_one_line_error(run_zplan(std::string(cmd) + " --model 13b --gpus 16 --nodes 2 --hw "
                                                       "a100 --comm-variants qwz"),
                          1, "--comm-variants: must be all, lossless or none, got 'qwz'");
  }
}

TEST_CASE("bad plan and sweep inputs: one line on stderr, exit 1 or 2", "[planner][cli]") {
  for (const char* cmd : {"plan", "sweep"}) {
    const std::string base = std::string(cmd) + " --model 1.3b --gpus 8 --hw a100 ";
    expect_one_line_error(run_zplan(base + "--stage 1 --offload-param cpu"), 1,
                          "--offload-param: cpu cannot be combined with --stage 1");
    expect_one_line_error(run_zplan(base + "--stage ''"), 1, "--stage: empty list");
    expect_one_line_error(run_zplan(base + "--micro-batch 8-1"), 1, "runs backwards");
    expect_one_line_error(run_zplan(base + "--knob bogus=1"), 1, "unknown knob 'bogus'");
    expect_one_line_error(run_zplan(base + "--reduce-bucket 0"), 1, "--reduce-bucket");
    expect_one_line_error(run_zplan(base + "--global-batch 1001"), 1, "not a multiple");
    expect_one_line_error(run_zplan(std::string(cmd) + " --model 1.3b --gpus 0 --hw a100"), 1,
                          "--gpus");
    expect_one_line_error(run_zplan(base + "--bogus-flag 1"), 2, "bogus-flag");
    expect_one_line_error(run_zplan(base + "--headroom 1"), 1,
                          "--headroom: must be a fraction in [0, 1), got 1");
    expect_one_line_error(run_zplan(base + "--seq-len 0"), 1,
                          "--seq-len: 0 is out of range (1 to 16777216 tokens)");
    expect_one_line_error(run_zplan(base + "--seq-len 2147483647"), 1,
                          "--seq-len: 2147483647 is out of range");
    // The limit named is the one enforced.
    expect_one_line_error(run_zplan(base + "--reduce-bucket 1e16"), 1, "out of range (1 to 1e15)");
    // A knob set with --knob is named as the user wrote it, not by the flag they did not use.
    expect_one_line_error(run_zplan(base + "--knob stage3_prefetch_bucket_size=1e6 --stage 1"), 1,
                          "zplan: --knob stage3_prefetch_bucket_size: only ZeRO stage 3 reads it, "
                          "but --stage is 1");
    expect_one_line_error(run_zplan(base + "--knob stage=1 --max-live 1e8"), 1,
                          "zplan: --max-live: only ZeRO stage 3 reads it, but --knob stage is 1");
    expect_one_line_error(run_zplan(base + "--knob offload_param=cpu --stage 2"), 1,
                          "zplan: --knob offload_param: cpu cannot be combined with --stage 2");
  }
  expect_one_line_error(run_zplan("sweep --model 1.3b --gpus 8 --hw a100 --top -1"), 1,
                        "--top: must be 0");
  expect_one_line_error(run_zplan("sweep --model 1.3b --gpus 1 --hw a100 --global-batch 2147483648"),
                        1, "--global-batch: 2147483648 samples per GPU is more than the 1000000");
  expect_one_line_error(run_zplan("--model 1.3b --hw a100"), 2, "--gpus");
  // A user's ds_config is what simulate and memory read; the planner says so.
  for (const char* cmd : {"plan ", "sweep ", ""}) {
    expect_one_line_error(
        run_zplan(std::string(cmd) + "--model 1.3b --gpus 8 --hw a100 --ds-config mine.json"), 1,
        "--ds-config: the planner searches the ZeRO settings and writes the ds_config itself; "
        "to predict your own file run `zplan simulate --ds-config mine.json`");
  }
  // A bad input is the error reported even when the output file already exists (as after the
  // README's first command, which leaves ds_config.json in the checkout).
  TempDir dir;
  const std::string existing = dir.file("ds_config.json");
  write_file_atomically(existing, "{}\n", false);
  expect_one_line_error(
      run_zplan("--model 1.3b --gpus 8 --hw a100 --stage 1 --offload-param cpu --out " + existing),
      1, "--offload-param: cpu cannot be combined with --stage 1");
  expect_one_line_error(run_zplan("--model 1.3b --gpus 8 --hw a100 --out " + existing), 1,
                        "exists; pass --force");
  // --report naming the --out file would replace the ds_config with HTML.
  expect_one_line_error(run_zplan("--model 1.3b --gpus 8 --hw a100 --force --out " + existing +
                                  " --report " + dir.file("./ds_config.json")),
                        1, "is also --out");
  CHECK(slurp(existing) == "{}\n");
  // No output replaces a file the command reads, --force or not: a trace over the ds_config
  // (also through a link or a hard link), a plan over the hardware profile or the model file.
  const std::string ds = dir.file("in.json");
  const std::string ds_text =
      "{\"train_micro_batch_size_per_gpu\": 1, \"zero_optimization\": {\"stage\": 2}}\n";
  write_file_atomically(ds, ds_text, false);
  REQUIRE(symlink(ds.c_str(), dir.file("link.json").c_str()) == 0);
  REQUIRE(link(ds.c_str(), dir.file("hard.json").c_str()) == 0);
  for (const char* name : {"in.json", "link.json", "hard.json"}) {
    expect_one_line_error(run_zplan("simulate --model 1.3b --gpus 8 --hw a100 --ds-config " + ds +
                                    " --force --trace " + dir.file(name)),
                          1, "--trace: " + dir.file(name) + " is also --ds-config");
  }
  CHECK(slurp(ds) == ds_text);
  const std::string hw = dir.file("hw.json");
  write_file_atomically(hw, slurp(std::string(ZPLAN_SOURCE_DIR) + "/hardware/a100.json"), false);
  const std::string hw_text = slurp(hw);
  expect_one_line_error(run_zplan("--model 1.3b --gpus 8 --force --hw " + hw + " --out " + hw), 1,
                        "--out: " + hw + " is also --hw");
  const std::string model = dir.file("model.json");
  write_file_atomically(
      model, slurp(std::string(ZPLAN_SOURCE_DIR) + "/tests/fidelity/models/ds-bf16mw-6.9b.json"),
      false);
  const std::string model_text = slurp(model);
  expect_one_line_error(run_zplan("--model " + model + " --gpus 8 --hw a100 --force --out " +
                                  existing + " --report " + model),
                        1, "--report: " + model + " is also --model");
  CHECK(slurp(hw) == hw_text);
  CHECK(slurp(model) == model_text);
}

TEST_CASE("zplan sweep: the same CSV with 1 and 2 threads, Pareto front marked", "[planner][cli]") {
  const std::string args =
      "sweep --model 6.7b --gpus 8 --hw a100-40g --stage 1,2,3 "
      "--reduce-bucket 5e7,5e8 --micro-batch 1-4 --offload-param none "
      "--csv --threads ";
  RunResult one = run_zplan(args + "1");
  RunResult two = run_zplan(args + "2");
  REQUIRE(one.exit_code == 0);
  REQUIRE(two.exit_code == 0);
  CHECK(one.out == two.out);
  CHECK(one.out.rfind("rank,stage,offload_optimizer,offload_param,micro_batch,", 0) == 0);
  CHECK(count_lines(one.out) > 10);
  // Some row is on the Pareto front (column "pareto" = 1).
  CHECK(one.out.find(",fits,1,") != std::string::npos);
  RunResult table = run_zplan(
      "sweep --model 1.3b --gpus 8 --hw a100 --stage 2,3 "
      "--micro-batch 1,2 --offload-optimizer none --offload-param none");
  REQUIRE(table.exit_code == 0);
  CHECK(table.out.find("Pareto front") != std::string::npos);
  CHECK(table.out.find("tokens/s") != std::string::npos);
}

}  // namespace
TEST_CASE("memory and simulate say when a config fits only inside the planner's headroom",
          "[planner][cli]") {
  // Llama-2-7B with examples/ds_configs/zero2.json at 3400 tokens: 76.9 of 80 GiB, 3.8% free.
  // sweep prunes it (5% headroom); memory and simulate said "fits" without a word about that.
  const std::string setup =
      " --model llama2-7b --gpus 8 --hw a100 --ds-config examples/ds_configs/zero2.json"
      " --seq-len 3400";
  const std::string remark =
      "(GPU 3.8% free: under the 5% headroom that plan and sweep keep, so they rule it out)";
  RunResult memory = run_zplan("memory" + setup);
  REQUIRE(memory.exit_code == 0);
  CHECK(memory.out.find("fits, 3.1 GiB free " + remark) != std::string::npos);
  RunResult simulate = run_zplan("simulate" + setup);
  REQUIRE(simulate.exit_code == 0);
  CHECK(simulate.out.find("host 24.0 of 2048 GiB per node " + remark) != std::string::npos);
  RunResult sweep = run_zplan(
      "sweep --model llama2-7b --gpus 8 --hw a100 --stage 2 --offload-optimizer none "
      "--micro-batch 2 --gas 8 --checkpointing none --overlap-comm true --reduce-bucket 5e8 "
      "--seq-len 3400 --json");
  REQUIRE(sweep.exit_code == 0);
  CHECK(nlohmann::json::parse(sweep.out)["configs"][0]["verdict"] == "pruned");
  // With room to spare, no remark.
  RunResult roomy = run_zplan("memory --model 20b --gpus 8 --hw a100 --stage 3 --micro-batch 1");
  CHECK(roomy.out.find("headroom") == std::string::npos);
}

TEST_CASE("plan searches cpu_checkpointing when listed, and names the memory tricks when "
          "nothing fits", "[planner]") {
  const std::string dir = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
  const std::string out = dir + "/zplan-cpu-ckpt-" + std::to_string(getpid()) + ".json";
  // Llama-3-8B at 128k tokens with a fused loss on 8 x A100: GPU checkpoints need 92.8 GiB at
  // ZeRO-3 without offload; in host memory they leave 58.7 GiB (docs/cost_model.md §6).
  const std::string base =
      "plan --model llama3-8b --gpus 8 --hw a100 --seq-len 131072 --loss fused --stage 3 "
      "--offload-optimizer none --offload-param none --force --out " + out + " ";
  RunResult r = run_zplan(base + "--checkpointing none,full,cpu");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("recommended: ZeRO-3, micro-batch 1 x gas 2, checkpointing to CPU") !=
        std::string::npos);
  CHECK(r.out.find("cpu_checkpointing: the prediction keeps the checkpoints in host memory") !=
        std::string::npos);
  const nlohmann::json written = nlohmann::json::parse(slurp(out));
  CHECK(written["activation_checkpointing"]["cpu_checkpointing"] == true);
  // Without it in the list nothing without offload fits, and "what would fit" names it.
  RunResult none = run_zplan(base + "--checkpointing none,full");
  CHECK(none.exit_code == 3);
  CHECK(none.out.find("checkpoints in host memory (--checkpointing cpu") != std::string::npos);
  std::remove(out.c_str());
}

}  // namespace zplan::testing

#endif  // ZPLAN_BINARY
