// The inputs of issue 16's new-user trial (tests/fixtures/trial/, named after the defects), run
// as the tester ran them: each is read as DeepSpeed and transformers read it, or refused in one
// line with DeepSpeed's reason or as "not modelled: <feature>", and what zplan assumed is said.
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace zplan::testing {
namespace {

using Catch::Matchers::Contains;
using nlohmann::json;

const std::string kT = "tests/fixtures/trial/";
const std::string kLlama8 = "memory --model llama3-8b --gpus 8 --hw a100 --seq-len 2048 ";

json run_json(const std::string& args) {
  const RunResult r = run_zplan(args + " --json");
  INFO("zplan " << args);
  INFO("stderr: " << r.err);
  REQUIRE((r.exit_code == 0 || r.exit_code == 3));
  return json::parse(r.out);
}

double gpu_bytes(const json& j, const char* category, int phase = 0) {
  return j["memory"]["phases"][phase]["gpu"]["bytes"].value(category, 0.0);
}

TEST_CASE("defect 1: the optimizer block's states, and DeepSpeed's refusals", "[cli][trial]") {
  // ZeRO-2 on 8 GPUs: Lion and Adagrad keep one fp32 state per partition element, Adam two.
  const json lion = run_json(kLlama8 + "--ds-config " + kT + "defect01_opt_lion.json");
  const json adagrad = run_json(kLlama8 + "--ds-config " + kT + "defect01_opt_adagrad.json");
  const json adam = run_json(kLlama8 + "--stage 2 --micro-batch 1");
  CHECK(gpu_bytes(lion, "optimizer_states") == Approx(gpu_bytes(adam, "optimizer_states") / 2));
  CHECK(gpu_bytes(adagrad, "optimizer_states") == Approx(gpu_bytes(lion, "optimizer_states")));
  CHECK(lion["optimizer"]["class"] == "FusedLion");
  CHECK(lion["optimizer"]["fp32_states"] == 1);
  CHECK(adam["optimizer"]["class"] == "FusedAdam");
  // Text: the optimizer is named where it is not Adam.
  const RunResult text = run_zplan(kLlama8 + "--ds-config " + kT + "defect01_opt_lion.json");
  CHECK_THAT(text.out, Contains("optimizer FusedLion (1 fp32 state)"));

  auto refused = [&](const char* file, const std::string& says) {
    const RunResult r = run_zplan(kLlama8 + "--ds-config " + kT + file);
    expect_one_line_error(r, 1, says);
  };
  refused("defect01_opt_onebit.json", "/optimizer/type: 1bit-Adam is not compatible with ZeRO");
  refused("defect01_opt_foo.json", "\"Foo\" is not a supported DeepSpeed Optimizer");
  refused("defect01_opt_muon.json", "not modelled: Muon");
  refused("defect01_opt_sgd.json", "You are using an untested ZeRO Optimizer (torch.optim.SGD)");
  refused("defect01_opt_lamb.json", "You are using an untested ZeRO Optimizer (FusedLamb)");
  refused("defect01_opt_torchadam_offload.json",
          "not modelled: torch.optim.AdamW stepping on the CPU under optimizer offload");
}

TEST_CASE("defect 2: an activation_checkpointing block is an assumption, said aloud",
          "[cli][trial]") {
  // As the tester ran it: the model's own 8,192-token context.
  const std::string cmd =
      "memory --model llama3-8b --gpus 8 --hw a100 --ds-config " + kT + "defect02_ac_alldefaults.json";
  const RunResult r = run_zplan(cmd);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("/activation_checkpointing: the block configures DeepSpeed's "
                             "checkpointing, it does not turn it on") &&
                        Contains("--checkpointing none if it does not"));
  CHECK_THAT(r.out, Contains("checkpointing full"));
  // Saying it on the command line silences the note.
  const RunResult none = run_zplan(cmd + " --checkpointing none");
  CHECK_THAT(none.out, Contains("DOES NOT FIT"));  // 82.6 GiB without checkpointing
  CHECK(none.err.find("activation_checkpointing") == std::string::npos);
  // A block holding only a misspelt key: DeepSpeed ignores the key; both are said.
  const RunResult unknown = run_zplan(kLlama8 + "--ds-config " + kT + "defect02_ac_unknown.json");
  CHECK_THAT(unknown.err, Contains("/activation_checkpointing/cpu_checkpoint is not a key") &&
                              Contains("did you mean \"cpu_checkpointing\"?") &&
                              Contains("the block configures DeepSpeed's checkpointing"));
  CHECK_THAT(unknown.out, Contains("checkpointing full,"));  // on the GPU: the typo changes nothing
}

TEST_CASE("defect 3: bf16 + fp32 accumulation at stage 1 is BF16_Optimizer", "[cli][trial]") {
  const json fp32 = run_json(kLlama8 + "--ds-config " + kT + "defect03_z1_fp32acc.json");
  const json bf16 = run_json(kLlama8 + "--stage 1 --micro-batch 1 --gas 4");
  // The fp32 gradient buffer is full size on every GPU: 4 bytes x 8,030,261,248 parameters more
  // model states than ZeRO-1 with bf16 accumulation.
  CHECK(fp32["memory"]["gpu_model_state_bytes"].get<double>() -
            bf16["memory"]["gpu_model_state_bytes"].get<double>() ==
        Approx(4.0 * 8'030'261'248).epsilon(1e-6));
  const RunResult r = run_zplan(kLlama8 + "--ds-config " + kT + "defect03_z1_fp32acc.json");
  CHECK_THAT(r.err, Contains("DeepSpeed runs BF16_Optimizer there"));
  // Stage 0 with fp32 accumulation: DeepSpeed raises NotImplementedError.
  expect_one_line_error(run_zplan(kLlama8 + "--ds-config " + kT + "defect03_z0_fp32acc.json"), 1,
                        "DeepSpeed does not support bf16 training with fp32 gradient accumulation");
}

TEST_CASE("defect 4: top-level features that change the job are refused", "[cli][trial]") {
  auto refused = [&](const char* file, const std::string& says) {
    expect_one_line_error(run_zplan(kLlama8 + "--ds-config " + kT + file), 1, says);
  };
  refused("defect04_dschat_z3_hybrid.json", "/hybrid_engine/enabled: not modelled: DeepSpeed's "
                                            "hybrid engine");
  refused("defect04_autocast.json", "/torch_autocast/enabled: not modelled: torch autocast");
  refused("defect04_autocast_qw.json", "Cannot enable both torch autocast and zero quantized "
                                       "weights");
  refused("defect04_pld.json", "not modelled: progressive layer drop");
  refused("defect04_randomltd.json", "not modelled: random-LTD");
  refused("defect04_curriculum.json", "not modelled: curriculum learning");
  refused("defect04_pipeline.json", "/pipeline: not modelled: pipeline parallelism");
}

TEST_CASE("defect 13: values DeepSpeed's pydantic classes coerce are read", "[cli][trial]") {
  const std::string cmd = "simulate --model llama3-70b --gpus 512 --nodes 64 --hw h100 "
                          "--checkpointing full --json --ds-config " + kT;
  CHECK(run_json(cmd + "defect13_stage_str.json")["ds_config"]["zero_optimization"]["stage"] == 3);
  CHECK(run_json(cmd + "defect13_hpz_str.json")["ds_config"]["zero_optimization"]
                ["zero_hpz_partition_size"] == 8);
  CHECK(run_json(cmd + "defect13_mics_str.json")["ds_config"]["zero_optimization"]
                ["mics_shard_size"] == 16);
  CHECK(run_json(cmd + "defect13_qw_str.json")["ds_config"]["zero_optimization"]
                ["zero_quantized_weights"] == true);
  CHECK(run_json(cmd + "defect13_mics_h_int.json")["ds_config"]["zero_optimization"]
                ["mics_hierarchical_params_gather"] == true);
}

TEST_CASE("defect 8: Gemma-2's attention default is said, soft-capping is counted",
          "[cli][trial]") {
  const std::string cmd =
      "memory --model " + kT + "defect08_gemma-2-2b.json --gpus 8 --hw a100 --stage 3";
  const RunResult r = run_zplan(cmd);
  CHECK_THAT(r.err, Contains("soft-caps its attention scores: transformers 4.42-4.46 train it "
                             "with eager attention by default"));
  CHECK(run_zplan(cmd + " --attention eager").err.find("soft-caps") == std::string::npos);
}

TEST_CASE("defect 14: GPT-2 with add_cross_attention is refused", "[cli][trial]") {
  expect_one_line_error(
      run_zplan("memory --model " + kT + "defect14_gpt2_cross_attention.json --gpus 8 --hw a100 "
                "--stage 2"),
      1, "/add_cross_attention: not modelled: GPT-2 cross-attention");
}

TEST_CASE("trial 2: Llama 4's experts and a sequence past the context are said in every mode",
          "[cli][trial]") {
  const std::string scout = "tests/models/data/Llama-4-Scout-17B-16E-text_config.json";
  for (const char* cmd : {"memory", "simulate"}) {
    INFO(cmd);
    const RunResult r = run_zplan(std::string(cmd) + " --model " + scout +
                                  " --gpus 8 --hw h100 --stage 3 --seq-len 1024");
    CHECK_THAT(r.err, Contains("runs every expert on every token, as Llama4TextMoe does"));
  }
  const RunResult r = run_zplan(
      "memory --model tests/models/data/OLMoE-1B-7B-0924.json --gpus 8 --hw h100 --stage 3 "
      "--seq-len 8192");
  CHECK_THAT(r.err, Contains("zplan: note: --seq-len 8192 is longer than OLMoE-1B-7B-0924's "
                             "max_position_embeddings (4096)"));
}

}  // namespace
}  // namespace zplan::testing
