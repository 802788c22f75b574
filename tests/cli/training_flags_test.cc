// The training-feature flags (attention, loss, fine-tuning, LoRA, zero.Init) as memory and
// simulate read them: the names users write, one line for what cannot run, and what the text
// and the JSON say the setup keeps.
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace zplan::testing {
namespace {

TEST_CASE("attention and loss flags: the names users write, and what cannot run", "[cli]") {
  for (const char* cmd : kSetupCommands) {
    INFO(cmd);
    const std::string base = std::string(cmd) + " --model 125m --gpus 8 --stage 2 ";
    // Hugging Face's spellings and the short ones.
    for (const char* a : {"eager", "SDPA", "flash_attention_2", "flash2"}) {
      INFO(a);
      RunResult r = run_zplan(base + "--hw a100 --attention " + a);
      CHECK(r.exit_code == 0);
    }
    CHECK(run_zplan(base + "--hw h100 --attention flash3").exit_code == 0);
    for (const char* l : {"standard", "no-upcast", "fused"}) {
      INFO(l);
      CHECK(run_zplan(base + "--hw a100 --loss " + l).exit_code == 0);
    }
    // Liger-Kernel patches the Llama family, not the GPT-3-shaped 125m (nor Qwen v1's remote
    // code, GPT-2, DeepSeek-V2/V3): its Trainer integration would run those unpatched.
    CHECK(run_zplan(std::string(cmd) + " --model llama2-7b --gpus 8 --stage 2 --hw a100 --loss LIGER")
              .exit_code == 0);
    expect_one_line_error(run_zplan(base + "--hw a100 --loss liger"), 1,
                          "--loss: liger: Liger-Kernel has no patch for 125m's model type");
    expect_one_line_error(run_zplan(base + "--hw a100 --attention flash"), 1,
                          "--attention: must be eager, sdpa, flash_attention_2 (flash2) or "
                          "flash_attention_3 (flash3), got 'flash'");
    expect_one_line_error(run_zplan(base + "--hw a100 --attention flash3"), 1,
                          "runs on Hopper GPUs (H100, H200) only");
    expect_one_line_error(run_zplan(base + "--hw v100 --precision fp16 --attention flash2"), 1,
                          "needs an Ampere or newer GPU");
    expect_one_line_error(run_zplan(base + "--hw a100 --precision fp32 --attention flash2"), 1,
                          "runs in fp16 or bf16 only");
    expect_one_line_error(run_zplan(base + "--hw a100 --attention sdpa --no-flash-attention"), 1,
                          "--no-flash-attention: contradicts --attention sdpa");
    expect_one_line_error(run_zplan(base + "--hw a100 --loss chunked"), 1,
                          "--loss: must be standard, no-upcast, fused or liger, got 'chunked'");
    expect_one_line_error(run_zplan(base + "--hw a100 --checkpointing gpu"), 1,
                          "is not none, full or cpu");
  }
}

TEST_CASE("memory and simulate print every resolved ZeRO knob, and params by their dtype",
          "[cli]") {
  for (const char* cmd : kSetupCommands) {
    INFO(cmd);
    RunResult r = run_zplan(std::string(cmd) +
                            " --model 125m --gpus 8 --hw a100 --precision fp32 --stage 3");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("zero_optimization: stage 3, offload_optimizer none, offload_param none, "
                     "overlap_comm true, contiguous_gradients true, reduce_bucket_size") !=
          std::string::npos);
    for (const char* key : {"stage3_prefetch_bucket_size", "stage3_param_persistence_threshold",
                            "stage3_max_live_parameters", "stage3_max_reuse_distance",
                            "sub_group_size"}) {
      CHECK(r.out.find(key) != std::string::npos);
    }
    CHECK(r.out.find("fp32 params") != std::string::npos);
    CHECK(r.out.find("params16") == std::string::npos);
    CHECK(r.out.find("16-bit params") == std::string::npos);
  }
}

TEST_CASE("bad fine-tuning flags: one line naming the flag, for every command", "[cli]") {
  const std::string plan_base = "plan --model llama3-8b --gpus 8 --hw a100 --micro-batch 1 ";
  for (const std::string& cmd :
       {std::string("memory --model llama3-8b --gpus 8 --hw a100 --stage 2 "),
        std::string("simulate --model llama3-8b --gpus 8 --hw a100 --stage 2 "), plan_base,
        std::string("sweep --model llama3-8b --gpus 8 --hw a100 --micro-batch 1 ")}) {
    INFO(cmd);
    expect_one_line_error(run_zplan(cmd + "--lora-rank 0"), 1,
                          "--lora-rank: must be a positive integer (the adapters' rank r), got 0");
    expect_one_line_error(run_zplan(cmd + "--lora-targets q_proj"), 1,
                          "--lora-targets: needs --lora-rank");
    expect_one_line_error(run_zplan(cmd + "--lora-rank 8 --lora-targets q_proj,,v_proj"), 1,
                          "--lora-targets: has an empty entry");
    expect_one_line_error(run_zplan(cmd + "--lora-rank 8 --lora-targets c_attn"), 1,
                          "--lora-targets: 'c_attn' matches no linear of llama3-8b");
    expect_one_line_error(run_zplan(cmd + "--trainable 0"), 1,
                          "--trainable: must be a fraction in (0, 1], got 0");
    expect_one_line_error(run_zplan(cmd + "--trainable 2"), 1, "--trainable: must be a fraction");
    expect_one_line_error(run_zplan(cmd + "--trainable 0.5 --lora-rank 8"), 1,
                          "--trainable: cannot be combined with --lora-rank");
    expect_one_line_error(run_zplan(cmd + "--lora-rank x"), 1,
                          "--lora-rank: 'x' is not a whole number");
  }
  expect_one_line_error(
      run_zplan("validate --model tiny-mlp-s --ranks 1 --hw examples/cpu-2core.json --stage 2 "
                "--lora-rank 4"), 1,
      "--lora-rank");
}

TEST_CASE("memory and simulate say what trains with --lora-rank, in text and JSON", "[cli]") {
  for (const char* cmd : kSetupCommands) {
    INFO(cmd);
    const std::string base =
        std::string(cmd) + " --model llama3-8b --gpus 1 --hw a100 --stage 0 --micro-batch 1 ";
    RunResult r = run_zplan(base + "--lora-rank 16");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("6.8 M trainable: LoRA rank 16 on q_proj,v_proj") != std::string::npos);
    RunResult j = run_zplan(base + "--lora-rank 16 --json");
    REQUIRE(j.exit_code == 0);
    CHECK(j.out.find("\"trainable_params\": 6815744") != std::string::npos);
    // Without the flags nothing is said.
    RunResult plain = run_zplan(base + "--json");
    CHECK(plain.out.find("trainable_params") == std::string::npos);
  }
}

// `memory <base> --loss <loss> --json`: the loss name it reports and its GPU peak.
double gpu_peak_with_loss(const std::string& base, const std::string& loss) {
  RunResult r = run_zplan(base + " --json --loss " + loss);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["workload"]["loss"] == loss);
  return j["memory"]["tiers"]["gpu"]["peak_bytes"].get<double>();
}

TEST_CASE("the liger loss keeps less than the fused loss on a SwiGLU model", "[cli]") {
  // Liger's SwiGLU kernel saves 2 bytes x f per token less and allocates one f-wide gradient
  // instead of three: at 32k tokens of Llama-3-8B (f = 14336) the recomputed layer's bytes fall.
  const std::string base = "memory --model llama3-8b --gpus 8 --hw h200 --stage 3 --seq-len 32768";
  CHECK(gpu_peak_with_loss(base, "liger") < gpu_peak_with_loss(base, "fused"));
}

TEST_CASE("ZeRO-3 with --no-zero-init counts the whole model at deepspeed.initialize", "[cli]") {
  // Llama-2-70B, ZeRO-3 with full CPU offload on 8 A100-80GB: the step fits, but a model handed
  // to deepspeed.initialize unpartitioned is moved to the GPU whole first, 128.5 GiB in bf16.
  const std::string base =
      "--model llama2-70b --gpus 8 --hw a100 --stage 3 --offload-optimizer cpu "
      "--offload-param cpu --seq-len 1024 ";
  RunResult plain = run_zplan("memory " + base + "--json");
  REQUIRE(plain.exit_code == 0);
  const nlohmann::json pj = nlohmann::json::parse(plain.out);
  CHECK(pj["memory"]["tiers"]["gpu"]["peak_phase"] != "init");
  CHECK_FALSE(pj["workload"].contains("zero_init"));
  RunResult outside = run_zplan("memory " + base + "--no-zero-init --json");
  REQUIRE(outside.exit_code == 0);
  const nlohmann::json oj = nlohmann::json::parse(outside.out);
  CHECK(oj["memory"]["tiers"]["gpu"]["peak_phase"] == "init");
  CHECK(oj["workload"]["zero_init"] == false);
  RunResult text = run_zplan("simulate " + base + "--no-zero-init");
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("at deepspeed.initialize: the whole model on the GPU") != std::string::npos);
  CHECK(text.out.find("DOES NOT FIT: GPU short by") != std::string::npos);
  RunResult sim = run_zplan("simulate " + base + "--no-zero-init --json");
  REQUIRE(sim.exit_code == 0);
  CHECK(nlohmann::json::parse(sim.out)["result"]["memory"]["gpu"]["peak_phase"] == "init");
}

TEST_CASE("the loss on 16-bit logits keeps less than the upcast one", "[cli]") {
  // 2021 GPT-2 (--loss no-upcast): 6 bytes per logit at the loss's peak instead of 12; at 8 x 2048
  // tokens of a 50257-word vocabulary that is the peak of a 125M model without checkpointing.
  const std::string base = "memory --model 125m --gpus 8 --hw a100 --stage 2 --micro-batch 8";
  CHECK(gpu_peak_with_loss(base, "no-upcast") < gpu_peak_with_loss(base, "standard"));
}

TEST_CASE("the script's AdamW by --client-optimizer: fused or foreach, and what contradicts it",
          "[cli]") {
  for (const char* cmd : kSetupCommands) {
    INFO(cmd);
    const std::string base = std::string(cmd) + " --model 1.3b --gpus 8 --hw a100 --stage 2 ";
    RunResult fe = run_zplan(base + "--client-optimizer adamw_torch");
    REQUIRE(fe.exit_code == 0);
    CHECK(fe.out.find("optimizer torch.optim.AdamW (2 fp32 states, foreach update)") !=
          std::string::npos);
    RunResult j = run_zplan(base + "--client-optimizer foreach --json");
    REQUIRE(j.exit_code == 0);
    CHECK(nlohmann::json::parse(j.out)["optimizer"]["gpu_update"] == "foreach");
    RunResult fu = run_zplan(base + "--client-optimizer FUSED");
    REQUIRE(fu.exit_code == 0);
    CHECK(fu.out.find("foreach") == std::string::npos);
    expect_one_line_error(run_zplan(base + "--client-optimizer sgd"), 1,
                          "--client-optimizer: must be fused, foreach, adamw_torch_fused or "
                          "adamw_torch, got 'sgd'");
    expect_one_line_error(
        run_zplan(base + "--offload-optimizer cpu --client-optimizer foreach"), 1,
        "--client-optimizer: with optimizer offload");
    TempFile block(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
                       "zero_optimization": {"stage": 2},
                       "optimizer": {"type": "AdamW", "params": {"lr": 1e-5}}})");
    expect_one_line_error(
        run_zplan(std::string(cmd) + " --model 1.3b --gpus 8 --hw a100 --ds-config " +
                  block.path + " --client-optimizer foreach"),
        1, "/optimizer, which builds FusedAdam");
  }
  // The foreach update's passes make the step longer.
  auto step_s = [](const std::string& flag) {
    RunResult r = run_zplan("simulate --model 1.3b --gpus 8 --hw a100 --stage 2 --json " + flag);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out)["result"]["step_time_s"].get<double>();
  };
  CHECK(step_s("--client-optimizer foreach") > step_s(""));
}

}  // namespace
}  // namespace zplan::testing
