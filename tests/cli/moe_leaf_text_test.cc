// What simulate and memory say about a mixture of experts at ZeRO-3: a file whose MoE blocks are
// not ZeRO-3 leaves gets a note (its experts are gathered one by one, and ranks can hang), a
// file that makes them leaves does not, and flags plan the leaf as the planner writes it.
#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

#include "tests/cli/cli_test_util.h"

namespace zplan::testing {
namespace {

TEST_CASE("a ZeRO-3 file whose MoE blocks are not leaves gets a note", "[cli]") {
  TempFile none(ds_config(R"("stage": 3, "leaf_module": {"classes": []})"), "none.json");
  TempFile plain(ds_config(R"("stage": 3)"), "plain.json");
  for (const char* cmd : {"memory", "simulate"}) {
    INFO(cmd);
    // transformers 4.x: a module per expert Linear, gathered as the router reaches them.
    const std::string run = std::string(cmd) +
                            " --model examples/hf/Mixtral-8x7B-v0.1.json --gpus 8 --hw h100 "
                            "--seq-len 1024 --transformers 4.57.1 --ds-config ";
    RunResult r = run_zplan(run + none.path);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("zplan: note: " + none.path +
                     ": /zero_optimization/leaf_module does not make MixtralSparseMoeBlock a "
                     "ZeRO-3 leaf: stage 3 gathers and hooks each expert's Linears one by "
                     "one") != std::string::npos);
    CHECK(r.err.find("training hangs") != std::string::npos);
    CHECK(r.out.find(", leaf_module classes []\n") != std::string::npos);
    // DeepSpeed 0.19's defaults make Mixtral's block a leaf: nothing to say.
    r = run_zplan(run + plain.path);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("leaf") == std::string::npos);
    CHECK(r.out.find("leaf_module") == std::string::npos);
    // transformers 5 (the default): the experts are one module, the same gathers on every
    // rank: the file is priced as it reads, with nothing to warn of.
    r = run_zplan(std::string(cmd) +
                  " --model examples/hf/Mixtral-8x7B-v0.1.json --gpus 8 --hw h100 "
                  "--seq-len 1024 --ds-config " + none.path);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("leaf") == std::string::npos);
    CHECK(r.out.find(", leaf_module classes []\n") != std::string::npos);
  }
}

TEST_CASE("the transformers flag takes 5 or 4, as a release line or a version", "[cli]") {
  for (const char* bad : {"3", "6.0", "five", "45", "4..1", "5.", "4.-1"}) {
    INFO(bad);
    RunResult r = run_zplan(std::string("memory --model examples/hf/Mixtral-8x7B-v0.1.json "
                                        "--gpus 8 --hw h100 --stage 3 --transformers ") + bad);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("--transformers: must be 5 or 4") != std::string::npos);
  }
  for (const char* good : {"4.57.1+cu121", "5.0.0rc1"}) {
    INFO(good);
    CHECK(run_zplan(std::string("memory --model examples/hf/Mixtral-8x7B-v0.1.json --gpus 8 "
                                "--hw h100 --stage 3 --transformers ") + good)
              .exit_code == 0);
  }
}

TEST_CASE("blocks made ZeRO-3 leaves by name are counted in the note", "[cli]") {
  TempFile some(ds_config(R"("stage": 3, "leaf_module": {"classes": [],
                                  "names": ["model.layers.5.block_sparse_moe"]})"),
                "some.json");
  RunResult r = run_zplan("memory --model examples/hf/Mixtral-8x7B-v0.1.json --gpus 8 --hw h100 "
                          "--seq-len 1024 --transformers 4 --ds-config " + some.path);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("/zero_optimization/leaf_module leaves 31 of the 32 MixtralSparseMoeBlock "
                   "blocks no ZeRO-3 leaf") != std::string::npos);
}

TEST_CASE("a zplan model file's experts follow --transformers unless it says fused_experts",
          "[cli]") {
  const std::string moe = R"({"family": "llama", "layers": 2, "hidden": 64, "heads": 4,
      "ffn": 128, "vocab": 256, "activation": "swiglu", "norm": "rmsnorm", "experts": 4,
      "experts_per_token": 2, "expert_ffn": 32)";
  TempFile plain(moe + "}", "moe.json");
  TempFile v4(moe + R"(, "fused_experts": false})", "moe4.json");
  const std::string run = "memory --gpus 8 --hw h100 --stage 3 --lora-rank 4 --lora-targets "
                          "gate_proj --model ";
  // transformers 5: no expert Linear for gate_proj to wrap; 4: one per expert.
  CHECK(run_zplan(run + plain.path).exit_code == 1);
  CHECK(run_zplan(run + plain.path + " --transformers 4").exit_code == 0);
  CHECK(run_zplan(run + v4.path).exit_code == 0);
}

TEST_CASE("flags plan an MoE block outside DeepSpeed's defaults as a listed leaf", "[cli]") {
  RunResult r = run_zplan(
      "simulate --model tests/models/data/DeepSeek-V2-Lite.json --gpus 8 --hw h100 --stage 3 "
      "--micro-batch 1 --seq-len 1024");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find(", leaf_module classes DeepSpeed's defaults + [DeepseekV2Moe]\n") !=
        std::string::npos);
  CHECK(r.err.find("leaf") == std::string::npos);
}

TEST_CASE("gpt-oss plans eager attention unless told flash_attention_3, and refuses sdpa",
          "[cli]") {
  const std::string run = "simulate --model tests/models/data/gpt-oss-20b.json --gpus 8 --hw h100 "
                          "--stage 3 --micro-batch 1 --seq-len 1024";
  RunResult r = run_zplan(run);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find(", attention eager\n") != std::string::npos);
  CHECK(r.out.find("leaf_module classes DeepSpeed's defaults + [GptOssMLP]") != std::string::npos);
  r = run_zplan(run + " --attention flash_attention_3");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find(", attention flash_attention_3\n") != std::string::npos);
  for (const char* a : {"sdpa", "flash2"}) {
    r = run_zplan(run + " --attention " + a);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("zplan: --attention: gpt-oss-20b's attention sinks run in eager attention "
                     "or the kernels-community/vllm-flash-attn3 kernel") != std::string::npos);
  }
  // plan says which attention it assumed, and how to get the fused kernel.
  TempFile out("", "ds_config.json");
  std::remove(out.path.c_str());
  r = run_zplan("plan --model tests/models/data/gpt-oss-20b.json --gpus 8 --hw h100 "
                "--seq-len 1024 --micro-batch 1 --out " + out.path);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("attention: the prediction assumes eager attention, what from_pretrained "
                   "gives GPT-OSS (no sdpa path for its attention sinks)") != std::string::npos);
  CHECK(r.out.find("sdpa\" or flash_attention_2 would not") == std::string::npos);
  // At its default 8K tokens nothing fits with eager attention; what would fit names the one
  // fused kernel for the sinks, never sdpa.
  r = run_zplan("plan --model tests/models/data/gpt-oss-20b.json --gpus 8 --hw h100 --force "
                "--out " + out.path);
  CHECK(r.exit_code == 3);
  CHECK(r.out.find("attn_implementation=\"kernels-community/vllm-flash-attn3\" (--attention "
                   "flash_attention_3) instead of eager: fits") != std::string::npos);
  CHECK(r.out.find("--attention sdpa") == std::string::npos);
}

}  // namespace
}  // namespace zplan::testing
