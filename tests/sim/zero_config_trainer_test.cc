// Tests of what the Hugging Face Trainer and the launcher fill into a ds_config, as zplan reads
// it (sim/zero_config.h): "auto" values, the stage Accelerate fills, and --precision standing for
// the block the launcher adds (reference/deepspeed_internals.md §1.6). The file's own rules:
// zero_config_test.cc.
#include "sim/ds_config/zero_config.h"

#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "tests/sim/zero_config_test_util.h"

namespace zplan::sim {
namespace {

using Catch::Matchers::Contains;
using nlohmann::json;
using namespace testing;

TEST_CASE("zero_optimization's \"auto\" values are filled as the Hugging Face Trainer does",
          "[zero_config]") {
  // reference §1.6: reduce_bucket_size = h^2; stage 3 only: prefetch int(0.9 h^2), persistence
  // 10 h. h = 6144: h^2 = 37,748,736; 0.9 h^2 = 33,973,862.4 -> 33,973,862; 10 h = 61,440.
  json z3 = {{"stage", 3},
             {"reduce_bucket_size", "auto"},
             {"stage3_prefetch_bucket_size", "auto"},
             {"stage3_param_persistence_threshold", "auto"}};
  DsConfig c3 = parse(with_zero(z3));
  CHECK(c3.zero.reduce_bucket_size == 37'748'736);
  CHECK(c3.zero.prefetch_bucket_size == 33'973'862);
  CHECK(c3.zero.param_persistence_threshold == 61'440);
  // One note says how they were filled, and what a plain DeepSpeed script gets instead.
  std::vector<std::string> notes;
  ParseContext noted = context8();
  noted.notes = &notes;
  parse(with_zero(z3), noted);
  // (The second note is the precision's: the test config has no bf16 or fp16 block.)
  REQUIRE(notes.size() == 2);
  CHECK(notes[0] ==
        "t.json: /zero_optimization: \"auto\" filled as the Hugging Face Trainer and Accelerate "
        "fill it from hidden size 6144: reduce_bucket_size 37748736 (DeepSpeed's own 500000000), "
        "stage3_prefetch_bucket_size 33973862 (DeepSpeed's own 50000000), "
        "stage3_param_persistence_threshold 61440 (DeepSpeed's own 100000); a script that calls "
        "deepspeed.initialize itself runs DeepSpeed's own values");

  SECTION("the stage-3 keys keep DeepSpeed's defaults in other stages") {
    json z2 = z3;
    z2["stage"] = 2;
    DsConfig c2 = parse(with_zero(z2));
    CHECK(c2.zero.reduce_bucket_size == 37'748'736);
    CHECK(c2.zero.prefetch_bucket_size == 50'000'000);
    CHECK(c2.zero.param_persistence_threshold == 100'000);
  }
  SECTION("any other \"auto\" is DeepSpeed's default") {
    DsConfig c = parse(with_zero({{"stage", 3},
                                  {"sub_group_size", "auto"},
                                  {"allgather_bucket_size", "auto"},
                                  {"stage3_max_live_parameters", "auto"},
                                  {"contiguous_gradients", "auto"},
                                  {"offload_optimizer", "auto"},
                                  {"cpu_offload", "auto"}}));
    CHECK(c.zero.sub_group_size == 1'000'000'000);
    CHECK(c.zero.allgather_bucket_size == 500'000'000);
    CHECK(c.zero.max_live_parameters == 1'000'000'000);
    CHECK(c.zero.contiguous_gradients);
    CHECK(c.zero.offload_optimizer.device == OffloadDevice::kNone);
  }
  SECTION("the Trainer fills only the JSON spelling, not pydantic's attribute name") {
    DsConfig c = parse(with_zero({{"stage", 3}, {"prefetch_bucket_size", "auto"}}));
    CHECK(c.zero.prefetch_bucket_size == 50'000'000);
  }
  SECTION("an unknown key holding \"auto\" is dropped before pydantic sees it") {
    CHECK(parse(with_zero({{"no_such_key", "auto"}})).zero.other == json::object());
  }
  SECTION("without a hidden size, hidden-size \"auto\"s are an error") {
    ParseContext no_model = context8();
    no_model.hidden_size = 0;
    CHECK_THAT(error_of(with_zero({{"reduce_bucket_size", "auto"}}), no_model),
               Contains("t.json: /zero_optimization/reduce_bucket_size: \"auto\""));
  }
}

TEST_CASE(
    "batch keys, precision and clipping set to \"auto\" follow the command line or the Trainer",
          "[zero_config]") {
  json j = {{"train_batch_size", "auto"},
            {"train_micro_batch_size_per_gpu", "auto"},
            {"gradient_accumulation_steps", "auto"},
            {"gradient_clipping", "auto"},
            {"fp16", {{"enabled", "auto"}}},
            {"bf16", {{"enabled", "auto"}}}};
  SECTION("the Trainer's defaults: micro-batch 8, accumulation 1, clipping 1.0") {
    std::vector<std::string> notes;
    ParseContext context = context8();
    context.notes = &notes;
    DsConfig c = parse(j, context);
    // The batch the Trainer's defaults make is the whole job's: each assumed value is said.
    CHECK(std::count(notes.begin(), notes.end(),
                     "t.json: /train_micro_batch_size_per_gpu is \"auto\": taken as the Hugging "
                     "Face Trainer's default, 8 (per_device_train_batch_size); give --micro-batch "
                     "for the one you run with") == 1);
    CHECK(std::count(notes.begin(), notes.end(),
                     "t.json: /gradient_accumulation_steps is \"auto\": taken as the Hugging "
                     "Face Trainer's default, 1 (gradient_accumulation_steps); give --gas for the "
                     "one you run with") == 1);
    CHECK(c.micro_batch == 8);
    CHECK(c.gradient_accumulation_steps == 1);
    CHECK(c.train_batch_size == 64);
    CHECK(c.gradient_clipping == 1.0);
    CHECK(c.precision == Precision::kBf16);  // ParseContext::auto_precision's default
  }
  SECTION("command-line values") {
    ParseContext context = context8();
    std::vector<std::string> notes;
    context.notes = &notes;
    context.micro_batch = 2;
    context.gradient_accumulation_steps = 4;
    context.auto_precision = Precision::kFp16;
    DsConfig c = parse(j, context);
    for (const std::string& n : notes) CHECK(n.find("Trainer's default") == std::string::npos);
    CHECK(c.micro_batch == 2);
    CHECK(c.gradient_accumulation_steps == 4);
    CHECK(c.train_batch_size == 64);
    CHECK(c.precision == Precision::kFp16);
    CHECK(c.grad_accum_dtype == Precision::kFp16);
    context.auto_precision = Precision::kFp32;
    CHECK(parse(j, context).precision == Precision::kFp32);
  }
  SECTION("a global batch from the command line derives the accumulation") {
    ParseContext context = context8();
    context.train_batch_size = 256;
    json k = {{"train_batch_size", "auto"}, {"train_micro_batch_size_per_gpu", 4}};
    DsConfig c = parse(k, context);
    CHECK(c.gradient_accumulation_steps == 8);
    // With every batch key "auto": the given global batch leaves nothing to the Trainer's
    // defaults; DeepSpeed's rule derives what the flags do not give (it used to take
    // accumulation 1 and fail: 4 x 1 x 8 != 256).
    context.micro_batch = 4;
    c = parse(j, context);
    CHECK(c.micro_batch == 4);
    CHECK(c.gradient_accumulation_steps == 8);
    context.micro_batch.reset();
    c = parse(j, context);
    CHECK(c.micro_batch == 32);
    CHECK(c.gradient_accumulation_steps == 1);
    context.gradient_accumulation_steps = 2;
    c = parse(j, context);
    CHECK(c.micro_batch == 16);
    // So does a train_batch_size written in the file, on any number of GPUs.
    ParseContext sixteen = context8();
    sixteen.dp_world_size = 16;
    c = parse({{"train_batch_size", 64},
               {"train_micro_batch_size_per_gpu", "auto"},
               {"gradient_accumulation_steps", "auto"}},
              sixteen);
    CHECK(c.micro_batch == 4);
    CHECK(c.gradient_accumulation_steps == 1);
  }
  SECTION("\"auto\" train batch with a micro-batch in the file") {
    DsConfig c = parse({{"train_batch_size", "auto"}, {"train_micro_batch_size_per_gpu", 2}});
    CHECK(c.train_batch_size == 16);
    CHECK(c.gradient_accumulation_steps == 1);
  }
}

TEST_CASE("an offload block's \"device\": \"auto\" is none, with a note", "[zero_config]") {
  // DeepSpeed's pydantic model drops the "auto"; Accelerate fills it from its
  // offload_optimizer_device / offload_param_device, "none" by default.
  std::vector<std::string> notes;
  ParseContext context = context8();
  context.notes = &notes;
  const json bf16 = {{"bf16", {{"enabled", true}}}};
  const DsConfig c = parse(merged(with_zero({{"stage", 3},
                                             {"offload_optimizer", {{"device", "auto"}}},
                                             {"offload_param", {{"device", "auto"}}}}),
                                  bf16),
                           context);
  CHECK(c.zero.offload_optimizer.device == OffloadDevice::kNone);
  CHECK(c.zero.offload_param.device == OffloadDevice::kNone);
  REQUIRE(notes.size() == 2);
  CHECK(notes[0].starts_with("t.json: /zero_optimization/offload_param/device is \"auto\": "
                             "planned as \"none\""));
  CHECK(notes[1].find("offload_optimizer_device (default none)") != std::string::npos);
  notes.clear();
  parse(merged(with_zero({{"stage", 3}, {"offload_optimizer", {{"device", "cpu"}}}}), bf16),
        context);
  CHECK(notes.empty());
}

TEST_CASE("a \"stage\": \"auto\" is the Trainer's stage 2, or --stage, with a note",
          "[zero_config]") {
  std::vector<std::string> notes;
  ParseContext context = context8();
  context.notes = &notes;
  // With a bf16 block, so that the only note is the stage's.
  const json bf16 = {{"bf16", {{"enabled", true}}}};
  CHECK(parse(merged(with_zero({{"stage", "auto"}}), bf16), context).zero.stage == 2);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] ==
        "t.json: /zero_optimization/stage is \"auto\": planned as ZeRO stage 2, which the Hugging "
        "Face Trainer fills in (Accelerate's zero_stage, ACCELERATE_DEEPSPEED_ZERO_STAGE, default "
        "2); DeepSpeed launched without the Trainer would run stage 0; --stage N plans another");
  notes.clear();
  parse(merged(with_zero({{"stage", 3}}), bf16), context);
  CHECK(notes.empty());
  // --stage fills the "auto", and only an "auto".
  context.stage = 3;
  CHECK(parse(merged(with_zero({{"stage", "auto"}}), bf16), context).zero.stage == 3);
  CHECK(notes.empty());
  CHECK(error_of(merged(with_zero({{"stage", 1}}), bf16), context) ==
        "t.json: /zero_optimization/stage: is 1 in the file, but --stage says 3; --stage fills "
        "only \"stage\": \"auto\" (edit the file to plan another)");
  // One that repeats the file's stage is the same job.
  CHECK(parse(merged(with_zero({{"stage", 3}}), bf16), context).zero.stage == 3);
  CHECK(error_of(merged({{"train_micro_batch_size_per_gpu", 1}}, bf16), context) ==
        "t.json: has no zero_optimization block (ZeRO stage 0); --stage fills only \"stage\": "
        "\"auto\"");
  context.stage = 4;
  CHECK(error_of(merged(with_zero({{"stage", "auto"}}), bf16), context) ==
        "--stage: must be a ZeRO stage 0, 1, 2 or 3, got 4");
}

TEST_CASE("a precision given on the command line must agree with the file", "[zero_config]") {
  ParseContext flag = context8();
  flag.auto_precision = Precision::kBf16;
  flag.precision_from_flag = true;
  json bf16 = with_zero({{"stage", 2}});
  bf16["bf16"] = {{"enabled", true}};
  CHECK(parse(bf16, flag).precision == Precision::kBf16);
  json fp16 = with_zero({{"stage", 2}});
  fp16["fp16"] = {{"enabled", true}};
  CHECK_THAT(error_of(fp16, flag),
             Contains("t.json: /fp16: is enabled in the file (fp16 training), but --precision "
                      "says bf16"));
  // The old name "bfloat16" is the key named.
  json old_name = with_zero({{"stage", 2}});
  old_name["bfloat16"] = {{"enabled", true}};
  ParseContext fp32 = flag;
  fp32.auto_precision = Precision::kFp32;
  CHECK_THAT(error_of(old_name, fp32), Contains("/bfloat16: is enabled in the file"));
  // A file without a bf16 block takes the one the launcher adds (Accelerate); one that turns
  // bf16 off keeps it off.
  CHECK(parse(with_zero({{"stage", 2}}), flag).precision == Precision::kBf16);
  json off = with_zero({{"stage", 2}});
  off["bf16"] = {{"enabled", false}};
  CHECK_THAT(error_of(off, flag),
             Contains("t.json: enables neither bf16 nor fp16 (fp32 training), but --precision "
                      "says bf16"));
  // "auto" follows the flag, so it always agrees; without the flag, the file decides.
  json hf = with_zero({{"stage", 2}});
  hf["fp16"] = {{"enabled", "auto"}};
  hf["bf16"] = {{"enabled", "auto"}};
  CHECK(parse(hf, flag).precision == Precision::kBf16);
  CHECK(parse(fp16).precision == Precision::kFp16);
}

TEST_CASE("the precision flag stands for the block the launcher adds", "[zero_config]") {
  ParseContext bf16 = context8();
  bf16.auto_precision = Precision::kBf16;
  bf16.precision_from_flag = true;
  ParseContext fp16 = bf16;
  fp16.auto_precision = Precision::kFp16;
  const json none = with_zero({{"stage", 2}});
  // Accelerate inserts {"enabled": true} for the asked precision when the file has no such block.
  CHECK(parse(none, bf16).precision == Precision::kBf16);
  CHECK(parse(none, fp16).precision == Precision::kFp16);
  const json fp16_auto = merged(none, {{"fp16", {{"enabled", "auto"}}}});
  CHECK(parse(fp16_auto, bf16).precision == Precision::kBf16);
  // A block the file gives is the file's: an explicit "enabled": false stays off.
  CHECK_THAT(error_of(merged(none, {{"bf16", {{"enabled", false}}}}), bf16),
             Contains("enables neither bf16 nor fp16 (fp32 training), but --precision says bf16"));
  CHECK_THAT(error_of(merged(none, {{"fp16", {{"enabled", true}}}}), bf16),
             Contains("t.json: /fp16: is enabled in the file (fp16 training), but --precision "
                      "says bf16"));
  // Without the flag the file says fp32, and a note says how to ask for the launcher's bf16.
  std::vector<std::string> notes;
  ParseContext plain = context8();
  plain.notes = &notes;
  CHECK(parse(none, plain).precision == Precision::kFp32);
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Contains("t.json has no bf16 or fp16 block: fp32 training") &&
                           Contains("--precision bf16"));
  // Only "fp16": {"enabled": "auto"} (FastChat's and Firefly's ZeRO configs, run with --bf16):
  // the file leaves the precision to the launcher, read as zplan's default flag would give it
  // (Accelerate inserts the bf16 block), the same as a file whose bf16 and fp16 are both
  // "auto"; a note says what was assumed.
  for (const json& file : {merged(none, {{"fp16", {{"enabled", "auto"}}}}),
                           merged(none, {{"fp16", {{"enabled", "auto"}}},
                                         {"bf16", {{"enabled", "auto"}}}})}) {
    notes.clear();
    CHECK(parse(file, plain).precision == Precision::kBf16);
    REQUIRE(notes.size() == 1);
    CHECK_THAT(notes[0], Contains("t.json leaves the precision to the launcher") &&
                             Contains("read as bf16 training, as the Trainer's --bf16") &&
                             Contains("--precision bf16, fp16 or fp32"));
  }
  // On a GPU without bf16 zplan's default is fp16: "auto" becomes fp16, and says so.
  notes.clear();
  ParseContext v100 = plain;
  v100.auto_precision = Precision::kFp16;
  CHECK(parse(merged(none, {{"fp16", {{"enabled", "auto"}}}}), v100).precision ==
        Precision::kFp16);
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Contains("read as fp16 training, as the Trainer's --fp16"));
  // An fp16 block that the file turns off says fp32 itself: no note.
  notes.clear();
  parse(merged(none, {{"fp16", {{"enabled", false}}}}), plain);
  CHECK(notes.empty());
}

}  // namespace
}  // namespace zplan::sim
