// Models whose modeling code ships with the checkpoint (trust_remote_code): what zplan plans
// for the parts that code decides, and says so. Qwen v1 reads no attn_implementation: it runs
// flash-attn 2 when the package imports and its own eager attention otherwise.
#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

#include "tests/cli/cli_test_util.h"

namespace zplan::testing {
namespace {

TEST_CASE("Qwen v1 plans flash-attn 2 where it runs, eager elsewhere, and refuses sdpa",
          "[cli]") {
  const std::string run = "simulate --model tests/models/data/Qwen-7B.json --gpus 8 --stage 3 "
                          "--micro-batch 1 --seq-len 1024 --hw ";
  RunResult r = run_zplan(run + "a100");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find(", attention flash_attention_2\n") != std::string::npos);
  CHECK(r.err.find("zplan: note: Qwen-7B is Qwen v1's remote code, which runs flash-attn 2 when "
                   "the flash_attn package imports") != std::string::npos);
  CHECK(r.err.find("planned with flash-attn 2 installed; --attention eager if it is not") !=
        std::string::npos);
  // V100 and fp32: use_flash_attn "auto" leaves it off, or flash-attn cannot run.
  r = run_zplan(run + "v100");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find(", attention eager\n") != std::string::npos);
  CHECK(r.err.find("planned with eager attention (flash-attn 2 does not run on V100") !=
        std::string::npos);
  r = run_zplan(run + "a100 --precision fp32");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find(", attention eager\n") != std::string::npos);
  CHECK(r.err.find("(flash-attn does not run in fp32)") != std::string::npos);
  // An explicit choice is taken as given, without the note; sdpa and FA3 do not exist there.
  r = run_zplan(run + "a100 --attention eager");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find(", attention eager\n") != std::string::npos);
  CHECK(r.err.find("remote code") == std::string::npos);
  for (const char* a : {"sdpa", "flash_attention_3"}) {
    r = run_zplan(run + "h100 --attention " + a);
    CHECK(r.exit_code == 1);
    CHECK(r.err == "zplan: --attention: Qwen-7B is Qwen v1's remote code (modeling_qwen.py), "
                   "which runs flash-attn 2 or its own eager attention only: give "
                   "flash_attention_2 or eager\n");
  }
}

TEST_CASE("Qwen v1 with use_flash_attn false trains with eager attention", "[cli]") {
  TempFile off(R"({"model_type": "qwen", "vocab_size": 151936, "hidden_size": 2048,
    "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 11008,
    "use_flash_attn": false})", "qwen-off.json");
  const std::string run = "simulate --model " + off.path +
                          " --gpus 8 --hw a100 --stage 2 --micro-batch 1 --seq-len 512";
  RunResult r = run_zplan(run);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find(", attention eager\n") != std::string::npos);
  CHECK(r.err.find("(its config sets use_flash_attn false)") != std::string::npos);
  r = run_zplan(run + " --attention flash2");
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("zplan: --attention: qwen-off's config sets use_flash_attn false") !=
        std::string::npos);
  // plan says what it assumed, and what would fit names flash-attn, never sdpa.
  TempFile out("", "ds_config.json");
  std::remove(out.path.c_str());
  r = run_zplan("plan --model tests/models/data/Qwen-7B.json --gpus 8 --hw a100 --seq-len 2048 "
                "--out " + out.path);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("attention: the prediction assumes the flash_attn package (flash-attn 2) is "
                   "installed: Qwen v1's remote code uses it") != std::string::npos);
  CHECK(r.out.find("model code: Qwen v1's modeling_qwen.py ships with the checkpoint: load it "
                   "with trust_remote_code=True") != std::string::npos);
  CHECK(r.out.find("sdpa") == std::string::npos);
  // On a V100 (or in fp32) the planner plans eager attention too, and offers no flash-attn.
  for (const char* where : {"--hw v100", "--hw a100 --precision fp32"}) {
    INFO(where);
    r = run_zplan("plan --model tests/models/data/Qwen-7B.json --gpus 8 --seq-len 1024 " +
                  std::string(where) + " --force --out " + out.path);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("attention: the prediction assumes Qwen v1's own eager attention (its "
                     "remote code has no sdpa path), which keeps [b, heads, s, s] tensors per "
                     "layer\n") != std::string::npos);
  }
  r = run_zplan("simulate --model tests/models/data/Qwen-7B.json --gpus 8 --hw a100 --stage 3 "
                "--precision fp32 --attention flash2");
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("fp32 training uses eager\n") != std::string::npos);
}

}  // namespace
}  // namespace zplan::testing
