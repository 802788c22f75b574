// Every kind of bad input ends in one line on stderr and a documented nonzero exit code --
// never a crash, a hang or a stack trace -- for every command that reads a training setup.
#include <filesystem>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "tests/cli/cli_test_util.h"

namespace zplan::testing {
namespace {

TEST_CASE("bad flags are usage errors (exit 2)", "[cli]") {
  expect_one_line_error(run_zplan("memory --model 20b --gpus 8 --hw a100 --frobnicate"), 2,
                        "--frobnicate");
  expect_one_line_error(run_zplan("simulate --model 20b --hw a100"), 2, "--gpus");
  expect_one_line_error(run_zplan("nosuchcommand"), 2, "nosuchcommand");
}

TEST_CASE("an empty --transformers is a mistake, not the default", "[cli]") {
  expect_one_line_error(run_zplan("memory --model 20b --gpus 8 --hw a100 --transformers ''"), 1,
                        "--transformers: must be 5 or 4");
}

TEST_CASE("batch flags that do not divide, or are too large, say so and name the flag", "[cli]") {
  for (const char* cmd : kSetupCommands) {
    INFO(cmd);
    const std::string base = std::string(cmd) + " --model 125m --gpus 8 --hw a100 --stage 3 ";
    // It used to say "must equal train_micro_batch_size_per_gpu 0 x ... = 0".
    expect_one_line_error(run_zplan(base + "--global-batch 7"), 1,
                          "train_batch_size 7 (--global-batch) is not a multiple of the 8 "
                          "data-parallel GPUs");
    expect_one_line_error(run_zplan(base + "--global-batch 12 --gas 2"), 1,
                          "is not a multiple of gradient_accumulation_steps 2 (--gas) x 8 "
                          "data-parallel GPUs = 16");
    // It used to say "command-line ZeRO flags: the batch size is too large".
    expect_one_line_error(run_zplan(base + "--micro-batch 99999999999999999999"), 1,
                          "--micro-batch: 9223372036854775807 is more than the 1000000 zplan "
                          "accepts");
    expect_one_line_error(run_zplan(base + "--gas 2000000"), 1,
                          "--gas: 2000000 is more than the 1000000 zplan accepts");
  }
}

TEST_CASE("a ds_config with \"stage\": \"auto\" runs the Trainer's ZeRO-2, and says so",
          "[cli]") {
  TempFile auto_stage(R"({"train_micro_batch_size_per_gpu": 1,
                          "zero_optimization": {"stage": "auto"}})",
                      "ds.json");
  for (const char* cmd : kSetupCommands) {
    RunResult r = run_zplan(std::string(cmd) + " --model 125m --gpus 8 --hw a100 --ds-config " +
                            auto_stage.path);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("/zero_optimization/stage is \"auto\": planned as ZeRO stage 2") !=
          std::string::npos);
  }
  // --stage fills it instead.
  RunResult z3 = run_zplan("memory --model 125m --gpus 8 --hw a100 --stage 3 --ds-config " +
                           auto_stage.path);
  INFO(z3.err);
  CHECK(z3.exit_code == 0);
  CHECK(z3.out.find("ZeRO-3") != std::string::npos);
  CHECK(z3.err.find("planned as ZeRO stage 2") == std::string::npos);
  // A flag the file would conflict with is refused, and the error names the two that apply.
  RunResult both = run_zplan("memory --model 125m --gpus 8 --hw a100 --offload-optimizer cpu "
                             "--ds-config " + auto_stage.path);
  expect_one_line_error(both, 1, "--ds-config: give either a ds_config file or ZeRO flags");
  CHECK(both.err.find("(--offload-*, bucket sizes)") != std::string::npos);
  CHECK(both.err.find("only --stage") != std::string::npos);
}

TEST_CASE("a quantized checkpoint is planned in the training precision, and says so", "[cli]") {
  RunResult r = run_zplan("memory --model " + std::string(ZPLAN_SOURCE_DIR) +
                          "/tests/models/data/gpt-oss-20b.json --gpus 8 --hw h100 --stage 3");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("quantization_config (quant_method \"mxfp4\"): planned with every weight in "
                   "the training precision") != std::string::npos);
  CHECK(run_zplan("memory --model llama3-8b --gpus 8 --hw h100 --stage 3").err.find(
            "quantization_config") == std::string::npos);
}

TEST_CASE("an NVMe swap buffer smaller than a tensor's slice is refused: DeepSpeed stops at "
          "zero.Init", "[cli]") {
  // llama3-8b's embedding, 128256 x 4096 = 525,336,576 elements, on one GPU does not fit
  // DeepSpeed's default buffer_size of 1e8 (partitioned_param_swapper.py get_buffer).
  TempFile nvme(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
    "zero_optimization": {"stage": 3,
      "offload_optimizer": {"device": "nvme", "nvme_path": "/local_nvme"},
      "offload_param": {"device": "nvme", "nvme_path": "/local_nvme", "buffer_size": 1e8}}})",
                "nvme.json");
  for (const char* cmd : {"simulate", "memory"}) {
    INFO(cmd);
    expect_one_line_error(
        run_zplan(std::string(cmd) + " --model llama3-8b --gpus 1 --hw h100 --ds-config " +
                  nvme.path),
        1,
        "/zero_optimization/offload_param/buffer_size: 100000000 elements, less than the largest "
        "tensor's slice per GPU, 525336576: DeepSpeed stops at zero.Init");
  }
  // The same job from flags: zplan sizes the buffer, as plan writes it.
  CHECK(run_zplan("memory --model llama3-8b --gpus 1 --hw h100 --stage 3 --offload-optimizer nvme "
                  "--offload-param nvme")
            .exit_code == 0);
}

TEST_CASE("the help's exit codes say that only plan exits 3 when nothing fits", "[cli]") {
  for (const char* cmd : {"", "memory ", "simulate ", "plan "}) {
    RunResult r = run_zplan(std::string(cmd) + "--help");
    INFO(cmd);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("3 nothing fits (plan; memory and simulate report a config that does not "
                     "fit and exit 0)") != std::string::npos);
  }
}

TEST_CASE("a ds_config's sequence_parallel_size is planned as Ulysses and refused as DeepSpeed "
          "refuses it",
          "[cli]") {
  TempFile sp4(R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 3},
                   "bf16": {"enabled": true}, "sequence_parallel_size": 4})",
               "ds.json");
  // 8 GPUs / sp 4 = 2 data-parallel ranks: 2 x 1 x 2 = 4 samples a step (runtime/config.py).
  RunResult r = run_zplan("simulate --model tiny-llama --gpus 8 --hw a100 --seq-len 1024 "
                          "--ds-config " + sp4.path);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("= 4 samples, seq 1024") != std::string::npos);
  CHECK(r.out.find("Ulysses sequence parallel 4 (256 tokens per GPU)") != std::string::npos);
  RunResult j = run_zplan("memory --model tiny-llama --gpus 8 --hw a100 --seq-len 1024 --json "
                          "--ds-config " + sp4.path);
  CHECK(j.out.find("\"ulysses_sequence_parallel\": 4") != std::string::npos);
  expect_one_line_error(
      run_zplan("memory --model tiny-llama --gpus 8 --hw a100 --seq-len 1026 --ds-config " +
                sp4.path),
      1, "/sequence_parallel_size: Ulysses sequence parallel size 4 does not divide the 1026");
  // 6 GPUs are not a multiple of 4.
  expect_one_line_error(
      run_zplan("memory --model tiny-llama --gpus 6 --hw a100 --ds-config " + sp4.path), 1,
      "does not divide the 6 GPUs");
}

TEST_CASE("AutoTP from a ds_config or --autotp: the text, the JSON and the refusals", "[cli]") {
  TempFile tp4(R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2},
                   "bf16": {"enabled": true}, "tensor_parallel": {"autotp_size": 2}})",
               "ds.json");
  // tiny-llama: 4 heads, 2 kv heads. 8 GPUs / AutoTP 2 = 4 data-parallel ranks: 2 x 1 x 4 = 8
  // samples a step.
  RunResult r = run_zplan("simulate --model tiny-llama --gpus 8 --hw a100 --seq-len 1024 "
                          "--ds-config " + tp4.path);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("= 8 samples, seq 1024") != std::string::npos);
  CHECK(r.out.find("AutoTP 2 (ZeRO over 4 data-parallel ranks)") != std::string::npos);
  // The same from the flag.
  RunResult f = run_zplan("simulate --model tiny-llama --gpus 8 --hw a100 --seq-len 1024 "
                          "--stage 2 --micro-batch 2 --precision bf16 --autotp 2");
  CHECK(f.exit_code == 0);
  CHECK(f.out.find("AutoTP 2 (ZeRO over 4 data-parallel ranks)") != std::string::npos);
  RunResult j = run_zplan("memory --model tiny-llama --gpus 8 --hw a100 --seq-len 1024 --json "
                          "--ds-config " + tp4.path);
  CHECK(j.out.find("\"autotp\"") != std::string::npos);
  CHECK(j.out.find("\"data_parallel\": 4") != std::string::npos);
  CHECK(j.out.find("\"params_per_gpu\"") != std::string::npos);
  expect_one_line_error(
      run_zplan("memory --model tiny-llama --gpus 5 --hw a100 --ds-config " + tp4.path), 1,
      "/tensor_parallel/autotp_size: AutoTP size 2 does not divide the 5 GPUs");
  // 2 kv heads do not split 4 ways.
  expect_one_line_error(
      run_zplan("memory --model tiny-llama --gpus 8 --hw a100 --stage 2 --autotp 4"), 1,
      "--autotp: AutoTP size 4 does not divide the model's 2 key/value heads");
  expect_one_line_error(run_zplan("memory --model tiny-llama --gpus 8 --hw a100 --autotp 2 "
                                  "--ds-config " + tp4.path),
                        1, "--ds-config");
  expect_one_line_error(
      run_zplan("validate --model tiny-llama --ranks 8 --hw a100 --ds-config " + tp4.path), 1,
      "which does not split layers");
}

TEST_CASE("plan over several AutoTP sizes that all miss gives the nearest size's advice", "[cli]") {
  // Llama-3-70B on one H100 node without offload: neither AutoTP 2 nor 4 fits; 4 misses by
  // less, and only its advice knows that 7 nodes would do.
  for (const char* sizes : {"2,4", "4,2"}) {
    INFO(sizes);
    TempFile out("", "plan.json");
    std::remove(out.path.c_str());
    RunResult r = run_zplan(std::string("--model llama3-70b --gpus 8 --hw h100 --seq-len 4096 "
                                        "--stage 1,2 --offload-optimizer none --autotp ") +
                            sizes + " --out " + out.path);
    CHECK(r.exit_code == 3);
    CHECK(r.out.find("AutoTP 4\n") != std::string::npos);
    CHECK(r.out.find("more GPUs: 56 GPUs") != std::string::npos);
    CHECK(r.out.find("nothing fits even on") == std::string::npos);
    CHECK(r.out.find("note: AutoTP sizes tried: ") != std::string::npos);
    CHECK(r.out.find("AutoTP 2: nothing fits, nearest OOM by") != std::string::npos);
  }
}

TEST_CASE("numbers are printed in the units they need", "[cli]") {
  // zplan models rounded H100's 79.65 GiB to 80 while other commands print 79.7.
  RunResult models = run_zplan("models");
  REQUIRE(models.exit_code == 0);
  // The row of h100 (column widths follow the longest names, so only the row's order is fixed).
  const size_t row = models.out.find("\n  h100 ");
  REQUIRE(row != std::string::npos);
  const std::string h100 = models.out.substr(row, models.out.find('\n', row + 1) - row);
  CHECK(h100.find(" H100-SXM5-80GB ") != std::string::npos);
  CHECK(h100.find(" 79.7 ") != std::string::npos);
  // A CPU profile's ranks run at GFLOP/s, which TFLOP/s printed as 0.0.
  RunResult cpu = run_zplan(
      "simulate --hw examples/cpu-2core.json --model tiny-mlp --gpus 2 --stage 2 --micro-batch 32");
  REQUIRE(cpu.exit_code == 0);
  CHECK(cpu.out.find("  GFLOP/s per GPU  ") != std::string::npos);
  CHECK(cpu.out.find("GFLOP/s)\n") != std::string::npos);
  CHECK(cpu.out.find("TFLOP/s") == std::string::npos);
  // Micro-steps simulated one by one print as the grouped ones do.
  const std::string sim =
      "simulate --model llama2-7b --gpus 16 --nodes 2 --hw h100 --stage 3 --offload-optimizer "
      "nvme --micro-batch 1 --gas 16";
  auto step_line = [](const std::string& out) { return out.substr(out.find("  step time")); };
  RunResult grouped = run_zplan(sim), each = run_zplan(sim + " --every-micro-step");
  REQUIRE(grouped.exit_code == 0);
  REQUIRE(each.exit_code == 0);
  CHECK(step_line(grouped.out).substr(0, 90) == step_line(each.out).substr(0, 90));
  // 16 micro-steps: the first, 14 alike printed as one "14 x <seconds> s", the last.
  const size_t times = grouped.out.find(" 14 x 0.");
  REQUIRE(times != std::string::npos);
  CHECK(grouped.out.substr(times + 8, 6).find(" s ") == 3);  // three decimals
}

TEST_CASE("a flag's value of the wrong type is a bad value (exit 1), as any other", "[cli]") {
  expect_one_line_error(run_zplan("simulate --model 20b --gpus eight --hw a100"), 1,
                        "--gpus: 'eight' is not a whole number");
  const std::string memory = "memory --model 125m --gpus 8 --hw a100 --stage 1 ";
  expect_one_line_error(run_zplan(memory + "--micro-batch 2.5"), 1,
                        "--micro-batch: '2.5' is not a whole number");
  expect_one_line_error(run_zplan(memory + "--overlap-comm maybe"), 1,
                        "--overlap-comm: 'maybe' is not true or false");
  // The bare zplan (plan) reads its own --micro-batch as a list, and --headroom as a number.
  expect_one_line_error(run_zplan("--model 20b --gpus 8 --hw a100 --headroom abc"), 1,
                        "--headroom: 'abc' is not a number");
  expect_one_line_error(run_zplan("validate --model tiny-mlp-s --device gpu"), 1,
                        "--device: gpu not in {cpu,cuda}");
}

TEST_CASE("unknown model, hardware or missing file (exit 1)", "[cli]") {
  for (const char* cmd : kSetupCommands) {
    INFO(cmd);
    expect_one_line_error(run_zplan(std::string(cmd) + " --model 21b --gpus 8 --hw a100"), 1,
                          "21b");
    expect_one_line_error(run_zplan(std::string(cmd) + " --model 20b --gpus 8 --hw b300"), 1,
                          "b300");
    expect_one_line_error(
        run_zplan(std::string(cmd) + " --model 20b --gpus 8 --hw a100 --ds-config /nonexistent.json"),
        1, "/nonexistent.json");
  }
}

TEST_CASE("malformed or invalid ds_config files name the file and the field (exit 1)",
          "[cli]") {
  struct Case {
    const char* json;
    const char* mentions;
  };
  const Case cases[] = {
      {R"({"train_batch_size": 16,)", "line 1"},                                   // truncated
      {R"({"train_batch_size": 16, "zero_optimization": {"stage": 5}})", "/zero_optimization/stage"},
      {R"({"train_batch_size": 16, "zero_optimization": {"stage": 2, "reduce_bucket_size": -5}})",
       "/zero_optimization/reduce_bucket_size"},
      {R"({"train_batch_size": 16, "zero_optimization": {"stage": 2,
           "offload_param": {"device": "cpu", "nvme_path": 3}}})",
       "/zero_optimization/offload_param/nvme_path"},
      {R"({"train_batch_size": 16, "zero_optimization": {"stage": 2, "stage": 3}})",
       "/zero_optimization/stage: is given twice"},
      {R"({"train_batch_size": 16, "zero_optimization": {"stage": 3, "stage3_prefetch": 1}})",
       "stage3_prefetch"},
      {R"({"train_batch_size": 15, "train_micro_batch_size_per_gpu": 2,
           "gradient_accumulation_steps": 1})",
       "train_batch_size"},
  };
  for (const Case& c : cases) {
    TempFile f(c.json);
    for (const char* cmd : kSetupCommands) {
      INFO(cmd << " " << c.json);
      RunResult r = run_zplan(std::string(cmd) + " --model 20b --gpus 8 --hw a100 --ds-config " +
                              f.path);
      expect_one_line_error(r, 1, c.mentions);
      CHECK(r.err.find(f.path) != std::string::npos);
    }
  }
}

TEST_CASE("a sequence past a learned position table is refused, rotary models take any", "[cli]") {
  for (const char* cmd : kSetupCommands) {
    INFO(cmd);
    // GPT-3 1.3B's table has 2048 rows: token 2049 has no embedding in transformers.
    expect_one_line_error(
        run_zplan(std::string(cmd) + " --model 1.3b --gpus 8 --hw a100 --seq-len 8192"), 1,
        "--seq-len: 8192 tokens is longer than 1.3b's learned position table (2048 positions");
    expect_one_line_error(run_zplan(std::string(cmd) + " --model examples/hf/gpt2.json --gpus 8 "
                                                       "--hw a100 --seq-len 1025"),
                          1, "(1024 positions");
  }
  for (const char* search : {"plan", "sweep"}) {
    expect_one_line_error(run_zplan(std::string(search) +
                                    " --model 1.3b --gpus 8 --hw a100 --seq-len 4096"),
                          1, "--seq-len: 4096 tokens is longer than 1.3b's");
  }
  CHECK(run_zplan("memory --model 1.3b --gpus 8 --hw a100 --stage 3 --seq-len 2048").exit_code ==
        0);
  CHECK(run_zplan("memory --model llama3-8b --gpus 8 --hw a100 --stage 3 --seq-len 16384")
            .exit_code == 0);
}

TEST_CASE("impossible cluster shapes are one clear line (exit 1)", "[cli]") {
  for (const char* cmd : kSetupCommands) {
    INFO(cmd);
    expect_one_line_error(run_zplan(std::string(cmd) + " --model 20b --gpus 0 --hw a100"), 1,
                          "--gpus");
    expect_one_line_error(run_zplan(std::string(cmd) + " --model 20b --gpus 3 --nodes 2 --hw a100"),
                          1, "--gpus");
    expect_one_line_error(run_zplan(std::string(cmd) + " --model 20b --gpus 16 --hw a100"), 1,
                          "--nodes");
    expect_one_line_error(run_zplan(std::string(cmd) + " --model 20b --gpus 8 --hw a100 --stage 4"),
                          1, "--stage: must be a ZeRO stage 0, 1, 2 or 3, got 4");
    expect_one_line_error(
        run_zplan(std::string(cmd) + " --model 20b --gpus 8 --hw a100 --stage 2 --offload-param cpu"),
        1, "offload_param");
    expect_one_line_error(
        run_zplan(std::string(cmd) + " --model 20b --gpus 8 --hw a100 --stage 3 --ds-config "
                                     "examples/ds_configs/zero2.json"),
        1, "is 2 in the file, but --stage says 3; --stage fills only \"stage\": \"auto\"");
    expect_one_line_error(
        run_zplan(std::string(cmd) + " --model 20b --gpus 8 --hw a100 --offload-param cpu "
                                     "--ds-config examples/ds_configs/zero2.json"),
        1, "--ds-config");
  }
}

TEST_CASE("a --precision must agree with --ds-config, as --micro-batch must", "[cli]") {
  for (const char* cmd : kSetupCommands) {
    INFO(cmd);
    const std::string base = std::string(cmd) +
                             " --model 125m --gpus 8 --hw a100 --ds-config "
                             "examples/ds_configs/zero2.json ";
    RunResult r = run_zplan(base + "--precision fp32");
    expect_one_line_error(r, 1, "/bf16: is enabled in the file (bf16 training), but --precision "
                                "says fp32");
    CHECK(r.err.find("examples/ds_configs/zero2.json") != std::string::npos);
    CHECK(run_zplan(base + "--precision bf16").exit_code == 0);
    CHECK(run_zplan(base).exit_code == 0);
  }
}

TEST_CASE("stage-3-only flags with a lower stage are refused, as the planner refuses them",
          "[cli]") {
  const char* const stage3_only[] = {"--prefetch-bucket 1e6", "--max-live 1e8",
                                     "--persistence-threshold 1e5", "--sub-group-size 1e8"};
  const std::string validate = "validate --model tiny-mlp-s --ranks 1 --hw examples/cpu-2core.json";
  for (const char* flag : stage3_only) {
    const std::string name = std::string(flag).substr(0, std::string(flag).find(' '));
    for (const char* cmd : kSetupCommands) {
      INFO(cmd << " " << flag);
      const std::string base = std::string(cmd) + " --model 125m --gpus 8 --hw a100 ";
      expect_one_line_error(run_zplan(base + "--stage 1 " + flag), 1,
                            name + ": only ZeRO stage 3 reads it, but --stage is 1");
      expect_one_line_error(run_zplan(base + flag), 1,
                            name + ": only ZeRO stage 3 reads it, but no --stage was given");
      CHECK(run_zplan(base + "--stage 3 " + flag).exit_code == 0);
    }
    INFO("validate " << flag);
    expect_one_line_error(run_zplan(validate + " --stage 2 " + flag), 1,
                          name + ": only ZeRO stage 3 reads it, but --stage is 2");
  }
  // Flags that several stages read stay accepted with any stage (one set of flags runs a whole
  // stage matrix, scripts/validate-matrix.sh); a stage that ignores one gets a note on stderr.
  for (const char* cmd : kSetupCommands) {
    INFO(cmd);
    const std::string base = std::string(cmd) + " --model 125m --gpus 8 --hw a100 ";
    RunResult r = run_zplan(base + "--stage 0 --reduce-bucket 2e6");
    CHECK(r.exit_code == 0);
    CHECK(r.err ==
          "zplan: note: --reduce-bucket has no effect: ZeRO stage 0 does not read it (it "
          "all-reduces in fixed 5e8-element pieces), and --stage is 0\n");
    r = run_zplan(base + "--stage 3 --allgather-bucket 2e6 --overlap-comm false");
    CHECK(r.exit_code == 0);
    CHECK(r.err ==
          "zplan: note: --allgather-bucket has no effect: only ZeRO stages 1 and 2 read it, and "
          "--stage is 3\n");
    r = run_zplan(base + "--overlap-comm true");
    CHECK(r.err ==
          "zplan: note: --overlap-comm has no effect: ZeRO stage 0 does not read it, and no "
          "--stage was given (stage 0)\n");
    CHECK(run_zplan(base + "--stage 2 --reduce-bucket 2e6 --allgather-bucket 2e6").err.empty());
  }
  // validate too (with 2 ranks it says it once, not once per rank: validate_test.cc).
  const RunResult v = run_zplan(validate + " --stage 0 --reduce-bucket 2e6 --steps 1");
  CHECK(v.exit_code == 0);
  CHECK(v.err.find("zplan: note: --reduce-bucket has no effect") != std::string::npos);
}

TEST_CASE("size flags of the single-config commands have the planner's ranges", "[cli]") {
  const std::string validate = "validate --model tiny-mlp-s --ranks 1 --hw examples/cpu-2core.json";
  for (const std::string& cmd :
       {std::string("memory --model 125m --gpus 8 --hw a100"),
        std::string("simulate --model 125m --gpus 8 --hw a100"), validate}) {
    INFO(cmd);
    expect_one_line_error(run_zplan(cmd + " --stage 2 --reduce-bucket 1e30"), 1,
                          "--reduce-bucket: '1e30' is out of range (1 to 1e15)");
    expect_one_line_error(run_zplan(cmd + " --stage 3 --prefetch-bucket 2e15"), 1,
                          "--prefetch-bucket: '2e15' is out of range (0 to 1e15)");
    expect_one_line_error(run_zplan(cmd + " --stage 2 --allgather-bucket 2.5"), 1,
                          "--allgather-bucket: '2.5' is not a whole number");
    expect_one_line_error(run_zplan(cmd + " --stage 2 --reduce-bucket 0"), 1,
                          "--reduce-bucket: '0' is out of range");
  }
}

TEST_CASE("enum-valued flags are read case-insensitively by every command", "[cli]") {
  for (const char* cmd : kSetupCommands) {
    INFO(cmd);
    const std::string base = std::string(cmd) + " --model 125m --gpus 8 --hw a100 --stage 3 ";
    RunResult upper =
        run_zplan(base + "--precision FP16 --offload-optimizer CPU --offload-param Nvme "
                         "--checkpointing FULL --json");
    RunResult lower =
        run_zplan(base + "--precision fp16 --offload-optimizer cpu --offload-param nvme "
                         "--checkpointing full --json");
    INFO(upper.err);
    CHECK(upper.exit_code == 0);
    CHECK(upper.out == lower.out);
    // Words that are no value in any case are still refused, naming the flag.
    expect_one_line_error(run_zplan(base + "--precision BF17"), 1, "--precision");
    expect_one_line_error(run_zplan(base + "--offload-optimizer GPU"), 1, "--offload-optimizer");
    expect_one_line_error(run_zplan(base + "--checkpointing most"), 1, "--checkpointing");
  }
  // plan and sweep read the same options.
  RunResult sweep = run_zplan(
      "sweep --model 125m --gpus 8 --hw a100 --stage 2 --micro-batch 1 --offload-optimizer CPU "
      "--checkpointing FULL --precision BF16 --json");
  INFO(sweep.err);
  CHECK(sweep.exit_code == 0);
  CHECK(run_zplan("memory --model 125m --gpus 8 --hw a100 --compat DeepSpeed-Estimator")
            .exit_code == 0);
}

// The --nvme-path line of a command's --help.
std::string nvme_path_help(const std::string& cmd) {
  RunResult r = run_zplan(cmd + " --help");
  CHECK(r.exit_code == 0);
  const size_t at = r.out.find("--nvme-path");
  if (at == std::string::npos) return "";
  // The description may wrap: take the option's block up to the next option.
  return r.out.substr(at, r.out.find("\n  -", at) - at);
}

TEST_CASE("the --nvme-path help says what each command does with the path", "[cli]") {
  for (const char* cmd : kSetupCommands) {
    INFO(cmd);
    std::string help = nvme_path_help(cmd);
    CHECK(help.find("nothing is written there") != std::string::npos);
  }
  std::string validate = nvme_path_help("validate");
  CHECK(validate.find("swap files go there") != std::string::npos);
  std::string plan = nvme_path_help("plan");
  CHECK(plan.find("ds_config") != std::string::npos);
}

TEST_CASE("a hardware profile with a missing or bad field names it (exit 1)", "[cli]") {
  // Take the stock a100 profile and break it in two ways.
  std::string stock = slurp(std::string(ZPLAN_SOURCE_DIR) + "/hardware/a100.json");
  std::string no_memory = stock;
  no_memory.replace(no_memory.find("\"memory_gib\""), 12, "\"memory_gb\"");
  std::string zero_bw = stock;
  size_t at = zero_bw.find("\"intra_busbw_gbps\": ");
  zero_bw.replace(at, zero_bw.find(',', at) - at, "\"intra_busbw_gbps\": 0");
  // A launch latency of 1e16 us overflowed the simulator's int64 nanoseconds (MFU 1015%).
  std::string slow_launch = stock;
  at = slow_launch.find("\"kernel_launch_us\": ");
  slow_launch.replace(at, slow_launch.find_first_of(",\n", at) - at, "\"kernel_launch_us\": 1e16");
  TempFile a(no_memory, "a.json"), b(zero_bw, "b.json"), c(slow_launch, "c.json");
  expect_one_line_error(run_zplan("memory --model 20b --gpus 8 --hw " + a.path), 1, "/gpu/memory");
  expect_one_line_error(run_zplan("memory --model 20b --gpus 8 --hw " + b.path), 1,
                        "/node/intra_busbw_gbps");
  expect_one_line_error(run_zplan("simulate --model 125m --gpus 8 --hw " + c.path + " --stage 2"),
                        1, "c.json: /gpu/kernel_launch_us: 1e16 is out of range (0 to 1e6 us)");
}

TEST_CASE("outputs are never written over an existing file without --force", "[cli]") {
  TempFile existing("precious", "trace.json");
  RunResult r = run_zplan("simulate --model 125m --gpus 8 --hw a100 --stage 2 --trace " +
                          existing.path);
  expect_one_line_error(r, 1, "exists");
  CHECK(slurp(existing.path) == "precious");
}

TEST_CASE(
    "with --force an output replaces only regular files, writes through links, is checked first",
    "[cli]") {
  namespace fs = std::filesystem;
  TempFile target("precious", "target.json");
  const std::string dir = target.dir;
  const std::string pipe = dir + "/pipe", sub = dir + "/sub", link = dir + "/link.json";
  const std::string to_pipe = dir + "/to_pipe", dangling = dir + "/dangling.json";
  REQUIRE(mkfifo(pipe.c_str(), 0600) == 0);
  fs::create_directory(sub);
  fs::create_symlink("target.json", link);
  fs::create_symlink("pipe", to_pipe);
  fs::create_symlink("missing.json", dangling);
  const std::string simulate = "simulate --model 125m --gpus 8 --hw a100 --stage 2 --force ";
  // A device, pipe or directory is never replaced by a regular file (as root, --out /dev/null
  // --force used to replace the system's /dev/null).
  expect_one_line_error(run_zplan(simulate + "--trace " + pipe), 1,
                        "pipe: is a pipe; zplan replaces only regular files");
  expect_one_line_error(run_zplan(simulate + "--trace " + to_pipe), 1,
                        "to_pipe: is a link to a pipe; zplan replaces only regular files");
  expect_one_line_error(run_zplan(simulate + "--trace " + sub), 1,
                        "sub: is a directory; zplan replaces only regular files");
  // Without --force too: the advice to pass it would not help.
  expect_one_line_error(
      run_zplan("simulate --model 125m --gpus 8 --hw a100 --stage 2 --trace " + sub), 1,
      "sub: is a directory; zplan replaces only regular files");
  expect_one_line_error(run_zplan(simulate + "--trace " + dangling), 1,
                        "dangling.json: is a symbolic link to nothing");
  CHECK(fs::is_fifo(fs::symlink_status(pipe)));
  CHECK(fs::is_symlink(fs::symlink_status(to_pipe)));
  CHECK(fs::is_directory(fs::symlink_status(sub)));
  // A link to a regular file is written through: the file is replaced, the link stays.
  RunResult r = run_zplan(simulate + "--trace " + link);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(fs::is_symlink(fs::symlink_status(link)));
  CHECK(slurp(target.path).rfind("{", 0) == 0);
  // A folder that is not there is reported before the work: before calibrate measures for
  // minutes, and before plan writes its ds_config (then failing on the report).
  const std::string nodir = dir + "/nodir/";
  expect_one_line_error(run_zplan("calibrate --backend fake --out " + nodir + "cpu.json"), 1,
                        "nodir/cpu.json: cannot create a file here: No such file or directory");
  expect_one_line_error(run_zplan("plan --model 125m --gpus 8 --hw a100 --stage 2 --micro-batch 1 "
                                  "--out " +
                                  dir + "/ds.json --report " + nodir + "r.html"),
                        1, "nodir/r.html: cannot create a file here");
  CHECK_FALSE(fs::exists(dir + "/ds.json"));
  // A file where the folder should be: ENOTDIR's words, not access()'s EACCES.
  const std::string afile = dir + "/afile";
  std::ofstream(afile) << "hi\n";
  expect_one_line_error(run_zplan("calibrate --backend fake --out " + afile + "/cpu.json"), 1,
                        "afile/cpu.json: cannot create a file here: Not a directory");
  CHECK(slurp(afile) == "hi\n");
  fs::remove(afile);
  for (const std::string& p : {pipe, sub, link, to_pipe, dangling}) fs::remove(p);
}

}  // namespace
}  // namespace zplan::testing
