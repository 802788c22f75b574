// Tests of writing ds_config.json (sim/zero_config.h): what is written holds what DeepSpeed 0.19
// needs and nothing else, and reads back to the same config (reference/deepspeed_internals.md §1).
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "base/json_reader.h"
#include "sim/ds_config/zero_config.h"
#include "tests/sim/zero_config_test_util.h"

namespace zplan::sim {
namespace {

using Catch::Matchers::Contains;
using nlohmann::json;
using namespace testing;

TEST_CASE("keys zplan does not model are kept and written back", "[zero_config]") {
  json j = {{"train_batch_size", 64},
            {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 1e-4}}}}},
            {"scheduler", {{"type", "WarmupLR"}}},
            {"steps_per_print", 10},
            {"wall_clock_breakdown", true},
            {"aio", {{"thread_count", 2}, {"queue_depth", 32}}},
            {"activation_checkpointing", {{"partitioned_activations", true}}},
            {"zero_optimization",
             {{"stage", 3},
              {"zero_quantized_nontrainable_weights", false},
              {"stage3_module_granularity_threshold", -1},
              {"leaf_module", {{"classes", "Block"}}},
              {"zeropp_loco_param", nullptr},
              {"offload_optimizer",
               {{"device", "cpu"}, {"super_offload", false}, {"cpuadam_cores_perc", 0.5}}}}}};
  DsConfig c = parse(j);
  CHECK(c.other["optimizer"] == j["optimizer"]);
  CHECK(c.other["steps_per_print"] == 10);
  CHECK(c.other["aio"] == json{{"thread_count", 2}});  // ignored by DeepSpeed since 0.17
  CHECK(c.aio.queue_depth == 32);
  CHECK(c.activation_checkpointing.enabled);
  CHECK(c.other["activation_checkpointing"] == json{{"partitioned_activations", true}});
  CHECK(c.zero.other["zero_quantized_nontrainable_weights"] == false);
  CHECK(c.zero.other["stage3_module_granularity_threshold"] == -1);
  CHECK_FALSE(c.zero.other.contains("leaf_module"));  // modelled: ZeroConfig::leaf_module
  CHECK(c.zero.leaf_module.classes == std::vector<std::string>{"Block"});
  CHECK_FALSE(c.zero.other.contains("zeropp_loco_param"));
  CHECK(c.zero.other["offload_optimizer"] ==
        json{{"super_offload", false}, {"cpuadam_cores_perc", 0.5}});
  json written = check_round_trip(c);
  CHECK(written["optimizer"] == j["optimizer"]);
  CHECK(written["aio"]["thread_count"] == 2);
  CHECK(written["zero_optimization"]["offload_optimizer"]["super_offload"] == false);
  CHECK(written["zero_optimization"]["leaf_module"] == json{{"classes", {"Block"}}});
  check_only_known_zero_keys(written);
}

TEST_CASE("written configs hold what DeepSpeed needs and nothing else", "[zero_config]") {
  DsConfig c = built(2);
  json w = check_round_trip(c);
  CHECK(w["train_batch_size"] == 64);
  CHECK(w["train_micro_batch_size_per_gpu"] == 4);
  CHECK(w["gradient_accumulation_steps"] == 2);
  CHECK(w["bf16"] == json{{"enabled", true}});
  CHECK_FALSE(w.contains("fp16"));
  CHECK_FALSE(w.contains("data_types"));
  CHECK_FALSE(w.contains("activation_checkpointing"));
  CHECK_FALSE(w.contains("aio"));
  CHECK(w["gradient_clipping"] == 1.0);
  CHECK(w["zero_optimization"]["overlap_comm"] == false);
  CHECK_FALSE(w["zero_optimization"].contains("offload_param"));
  CHECK_FALSE(w["zero_optimization"].contains("offload_optimizer"));
  CHECK_FALSE(w["zero_optimization"].contains("stage3_model_persistence_threshold"));
  check_only_known_zero_keys(w);
}

TEST_CASE("a written file holds only the zero_optimization keys its stage reads",
          "[zero_config]") {
  // stage_1_and_2.py reads the bucket, overlap, reduce_scatter, multi-rank all-reduce, all-gather
  // bucket and round-robin keys; stage3.py and parameter_offload.py read the bucket, overlap and
  // reduce_scatter keys, sub_group_size and the stage3_* keys; without ZeRO the engine reads none
  // of them.
  const std::vector<std::string> stage12 = {"use_multi_rank_bucket_allreduce",
                                            "allgather_bucket_size", "round_robin_gradients"};
  const std::vector<std::string> stage3 = {
      "sub_group_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold",
      "stage3_max_live_parameters", "stage3_max_reuse_distance"};
  const std::vector<std::string> zero = {"contiguous_gradients", "reduce_bucket_size",
                                         "overlap_comm", "reduce_scatter"};
  for (int stage = 0; stage <= 3; ++stage) {
    INFO("stage " << stage);
    const json z = check_round_trip(built(stage))["zero_optimization"];
    for (const std::string& k : stage12) CHECK(z.contains(k) == (stage == 1 || stage == 2));
    for (const std::string& k : stage3) CHECK(z.contains(k) == (stage == 3));
    for (const std::string& k : zero) CHECK(z.contains(k) == (stage >= 1));
    CHECK(z["stage"] == stage);
  }
}

TEST_CASE("an fp32 file turns fp16 and bf16 off in so many words", "[zero_config]") {
  // The Hugging Face Trainer takes a file with no "fp16": {"enabled": false} to be fp16
  // (HfTrainerDeepSpeedConfig.trainer_config_process), and Accelerate does too.
  DsConfig c = built(2);
  c.precision = c.grad_accum_dtype = Precision::kFp32;
  json w = check_round_trip(c);
  CHECK(w["fp16"] == json{{"enabled", false}});
  CHECK(w["bf16"] == json{{"enabled", false}});
  c.precision = c.grad_accum_dtype = Precision::kFp16;
  w = check_round_trip(c);
  CHECK(w["fp16"] == json{{"enabled", true}});
  CHECK_FALSE(w.contains("bf16"));
}

TEST_CASE("configs built in code round-trip and validate", "[zero_config]") {
  std::vector<DsConfig> configs;
  for (int stage = 0; stage <= 3; ++stage) configs.push_back(built(stage));
  {
    DsConfig c = built(0);
    c.precision = c.grad_accum_dtype = Precision::kFp32;
    c.gradient_clipping = 0;
    configs.push_back(c);
  }
  {
    DsConfig c = built(1);
    c.precision = Precision::kFp16;
    c.grad_accum_dtype = Precision::kFp32;
    c.zero.offload_optimizer.device = OffloadDevice::kCpu;
    c.zero.offload_optimizer.pin_memory = false;
    c.zero.reduce_bucket_size = 123'456;
    c.zero.round_robin_gradients = true;
    c.other["fp16"] = {{"loss_scale", 0}, {"initial_scale_power", 12}};
    configs.push_back(c);
  }
  {
    DsConfig c = built(3);
    c.zero.offload_optimizer = {OffloadDevice::kNvme, "/nvme", 8, true, true, true, true, 0.3};
    c.zero.offload_param.device = OffloadDevice::kNvme;
    c.zero.offload_param.nvme_path = "/nvme";
    c.zero.offload_param.buffer_size = 200'000'000;
    c.zero.model_persistence_threshold = 1'000'000;
    c.zero.sub_group_size = 100'000'000;
    c.aio.queue_depth = 32;
    c.aio.use_gds = true;
    c.activation_checkpointing.enabled = true;
    c.activation_checkpointing.cpu_checkpointing = true;
    c.activation_checkpointing.number_checkpoints = 12;
    c.gradient_clipping = 0.5;
    c.zero.other["stage3_gather_16bit_weights_on_model_save"] = true;
    configs.push_back(c);
  }
  {
    DsConfig c = built(2);
    c.activation_checkpointing.enabled = true;
    c.activation_checkpointing.partition_activations = true;
    c.activation_checkpointing.contiguous_memory_optimization = true;
    c.activation_checkpointing.number_checkpoints = 44;
    c.aio.block_size = 2 << 20;  // written without NVMe, to keep it
    configs.push_back(c);
  }
  for (size_t i = 0; i < configs.size(); ++i) {
    INFO("config " << i);
    CHECK_NOTHROW(validate_ds_config(configs[i], 8, "planner"));
    json w = check_round_trip(configs[i]);
    check_only_known_zero_keys(w);
    CHECK(w["zero_optimization"].contains("overlap_comm") == (configs[i].zero.stage >= 1));
  }
  // Offload blocks with device "none" and disabled checkpointing are not written.
  DsConfig quiet = built(2);
  quiet.zero.offload_param.buffer_count = 99;
  quiet.activation_checkpointing.profile = true;
  json w = check_round_trip(quiet);
  CHECK_FALSE(w["zero_optimization"].contains("offload_param"));
  CHECK_FALSE(w.contains("activation_checkpointing"));
}

TEST_CASE("validate_ds_config rejects what parse_ds_config rejects", "[zero_config]") {
  auto err = [](auto change) {
    DsConfig c = built(2);
    change(c);
    return validate_error(c);
  };
  CHECK_THAT(err([](DsConfig& c) { c.zero.stage = 4; }),
             Contains("planner: /zero_optimization/stage: must be a ZeRO stage"));
  CHECK_THAT(err([](DsConfig& c) { c.zero.reduce_bucket_size = -1; }),
             Contains("planner: /zero_optimization/reduce_bucket_size: must not be negative"));
  CHECK_THAT(err([](DsConfig& c) { c.zero.allgather_bucket_size = 0; }),
             Contains("planner: /zero_optimization/allgather_bucket_size: must be a positive"));
  CHECK_THAT(err([](DsConfig& c) { c.zero.sub_group_size = -1; }),
             Contains("planner: /zero_optimization/sub_group_size"));
  CHECK_THAT(err([](DsConfig& c) { c.zero.max_reuse_distance = -1; }),
             Contains("planner: /zero_optimization/stage3_max_reuse_distance"));
  CHECK_THAT(err([](DsConfig& c) { c.zero.offload_param.device = OffloadDevice::kCpu; }),
             Contains("planner: /zero_optimization/offload_param/device: parameter offload"));
  CHECK_THAT(err([](DsConfig& c) {
               c.zero.offload_optimizer.device = OffloadDevice::kNvme;
               c.zero.offload_optimizer.nvme_path = "/n";
             }),
             Contains("planner: /zero_optimization/offload_optimizer/device: NVMe"));
  CHECK_THAT(err([](DsConfig& c) {
               c.zero.stage = 3;
               c.zero.offload_param.device = OffloadDevice::kNvme;
             }),
             Contains("planner: /zero_optimization/offload_param/nvme_path: is needed"));
  CHECK_THAT(err([](DsConfig& c) { c.zero.offload_optimizer.ratio = 0.5; }),
             Contains("planner: /zero_optimization/offload_optimizer/ratio: partial offload"));
  CHECK_THAT(err([](DsConfig& c) {
               c.zero.stage = 3;
               c.zero.offload_optimizer.ratio = 2;
             }),
             Contains("planner: /zero_optimization/offload_optimizer/ratio: must be between"));
  CHECK_THAT(err([](DsConfig& c) {
               c.zero.offload_optimizer.device = OffloadDevice::kCpu;
               c.zero.offload_optimizer.buffer_count = 0;
             }),
             Contains("planner: /zero_optimization/offload_optimizer/buffer_count"));
  CHECK_THAT(err([](DsConfig& c) {
               c.zero.offload_optimizer.device = OffloadDevice::kCpu;
               c.zero.contiguous_gradients = false;
             }),
             Contains("planner: /zero_optimization/contiguous_gradients"));
  CHECK_THAT(err([](DsConfig& c) {
               c.zero.stage = 3;
               c.zero.other["stage3_allgather_sequential"] = true;
             }),
             Contains("planner: /zero_optimization/stage3_prefetch_bucket_size: must be 1"));
  CHECK_THAT(err([](DsConfig& c) { c.train_batch_size = 65; }),
             Contains("planner: /train_batch_size: train_batch_size 65 must equal"));
  CHECK_THAT(err([](DsConfig& c) { c.micro_batch = 0; }),
             Contains("planner: /train_micro_batch_size_per_gpu: must be positive"));
  CHECK_THAT(err([](DsConfig& c) {
               c.activation_checkpointing.enabled = true;
               c.activation_checkpointing.contiguous_memory_optimization = true;
             }),
             Contains("planner: /activation_checkpointing/contiguous_memory_optimization"));
  CHECK_THAT(err([](DsConfig& c) { c.aio.intra_op_parallelism = 0; }),
             Contains("planner: /aio/intra_op_parallelism"));
  CHECK_THAT(err([](DsConfig& c) { c.gradient_clipping = std::nan(""); }),
             Contains("planner: /gradient_clipping"));
  CHECK_THAT(err([](DsConfig& c) {
               c.zero.stage = 0;
               c.grad_accum_dtype = Precision::kFp32;
             }),
             Contains("planner: /data_types/grad_accum_dtype"));
  CHECK_THAT(validate_error(built(2), 0), Contains("planner: the data-parallel world size"));
  // What `other` may hold.
  CHECK_THAT(err([](DsConfig& c) { c.other = json::array(); }),
             Contains("planner: DsConfig::other must be a JSON object"));
  CHECK_THAT(err([](DsConfig& c) { c.other["train_batch_size"] = 64; }),
             Contains("planner: /train_batch_size: belongs in DsConfig's own fields"));
  CHECK_THAT(err([](DsConfig& c) {
               c.other["fp16"] = {{"enabled", true}};
             }),
             Contains("planner: /fp16/enabled: belongs in DsConfig's own fields"));
  CHECK_THAT(err([](DsConfig& c) {
               c.other["fp16"] = {{"loss_scale", "x"}};
             }),
             Contains("planner: /fp16/loss_scale: must be a number"));
  CHECK_THAT(err([](DsConfig& c) { c.other["aio"] = 5; }),
             Contains("planner: /aio: must be an object"));
  CHECK_THAT(err([](DsConfig& c) { c.zero.other["overlap_comm"] = true; }),
             Contains("planner: /zero_optimization/overlap_comm: belongs in ZeroConfig's own"));
  CHECK_THAT(err([](DsConfig& c) { c.zero.other["prefetch_bucket_size"] = 5; }),
             Contains("planner: /zero_optimization/prefetch_bucket_size: belongs in"));
  CHECK_THAT(err([](DsConfig& c) { c.zero.other["no_such_key"] = 5; }),
             Contains("planner: /zero_optimization/no_such_key: is not a key DeepSpeed"));
  CHECK_THAT(err([](DsConfig& c) { c.zero.other["zero_quantized_nontrainable_weights"] = 5; }),
             Contains("planner: /zero_optimization/zero_quantized_nontrainable_weights: must be "
                      "true or"));
  CHECK_THAT(err([](DsConfig& c) { c.zero.other["zero_quantized_weights"] = true; }),
             Contains("planner: /zero_optimization/zero_quantized_weights: belongs in"));
  CHECK_THAT(err([](DsConfig& c) {
               c.zero.other["offload_optimizer"] = {{"ratio", 0.5}};
             }),
             Contains("planner: /zero_optimization/offload_optimizer/ratio: is not an"));
  // The top-level blocks kept whole in `other` get a file's checks, without a JSON round trip.
  CHECK_THAT(err([](DsConfig& c) { c.other["compile"] = {{"deepcompile", true}}; }),
             Contains("planner: /compile/deepcompile: not modelled"));
  // AutoTP 2 on the 8 GPUs: the batch keys count 4 data-parallel ranks (4 x 2 x 4 = 32, not 64).
  CHECK_THAT(err([](DsConfig& c) { c.other["tensor_parallel"] = {{"autotp_size", 2}}; }),
             Contains("planner: /train_batch_size: train_batch_size 64 must equal "
                      "train_micro_batch_size_per_gpu 4 x gradient_accumulation_steps 2 x 4"));
  CHECK_THAT(err([](DsConfig& c) {
               c.other["tensor_parallel"] = {{"autotp_size", 2}, {"preset_model", "llama"}};
               c.train_batch_size = 32;
             }),
             Contains("planner: /tensor_parallel/preset_model: not modelled"));
  CHECK_THAT(err([](DsConfig& c) { c.other["communication_data_type"] = "fp8"; }),
             Contains("planner: /communication_data_type: must be"));
  CHECK_THAT(err([](DsConfig& c) {
               c.other["communication_data_type"] = "fp32";
             }),
             Contains("planner: /communication_data_type: not modelled"));
  // fp16's dynamic-scaling checks apply when the config trains in fp16, as in a file.
  CHECK_THAT(err([](DsConfig& c) {
               c.precision = Precision::kFp16;
               c.grad_accum_dtype = Precision::kFp16;
               c.other["fp16"] = {{"loss_scale_window", 0}};
             }),
             Contains("planner: /fp16/loss_scale_window: must be positive"));
  DsConfig bf16 = built(2);
  bf16.other["fp16"] = {{"loss_scale_window", 0}};
  CHECK_NOTHROW(validate_ds_config(bf16, 8, "planner"));
}

TEST_CASE("every example parses for 8 GPUs with hidden 6144 and round-trips", "[zero_config]") {
  for (const char* name : kExamples) {
    INFO(name);
    DsConfig c = load_ds_config(example_path(name), context8());
    CHECK(c.train_batch_size == c.micro_batch * c.gradient_accumulation_steps * 8);
    CHECK_NOTHROW(validate_ds_config(c, 8, name));
    json written = check_round_trip(c);
    check_only_known_zero_keys(written);
    // Examples that give all three batch keys give consistent ones.
    json raw = load_json_file(example_path(name));
    if (raw.contains("train_batch_size") && raw["train_batch_size"].is_number() &&
        raw.contains("gradient_accumulation_steps")) {
      CHECK(raw["train_batch_size"] == raw["train_micro_batch_size_per_gpu"].get<int64_t>() *
                                           raw["gradient_accumulation_steps"].get<int64_t>() * 8);
    }
  }
  DsConfig hf = load_ds_config(example_path("zero3_hf_auto.json"), context8());
  CHECK(hf.zero.stage == 3);
  CHECK(hf.zero.reduce_bucket_size == 37'748'736);
  CHECK(hf.zero.prefetch_bucket_size == 33'973'862);
  CHECK(hf.zero.param_persistence_threshold == 61'440);
  CHECK(hf.micro_batch == 8);
  CHECK(hf.precision == Precision::kBf16);
  DsConfig nvme = load_ds_config(example_path("zero3_offload_nvme.json"), context8());
  CHECK(nvme.zero.offload_optimizer.device == OffloadDevice::kNvme);
  CHECK(nvme.zero.offload_optimizer.pipeline_read);
  CHECK(nvme.zero.offload_param.device == OffloadDevice::kNvme);
  CHECK(nvme.aio.intra_op_parallelism == 4);
  DsConfig ckpt = load_ds_config(example_path("zero2_checkpointing.json"), context8());
  CHECK(ckpt.activation_checkpointing.enabled);
  CHECK(ckpt.activation_checkpointing.number_checkpoints == 40);
  DsConfig z2 = load_ds_config(example_path("zero2.json"), context8());
  CHECK(z2.gradient_accumulation_steps == 8);  // 128 / 2 / 8
  CHECK_THAT(
      [] {
        try {
          load_ds_config(example_path("no_such_file.json"), context8());
        } catch (const InputError& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      Contains("no_such_file.json"));
}

// Puts `value` at a random place of `doc` (replacing a member, or adding one).
void mutate(json& doc, std::mt19937& rng, const json& value) {
  json* node = &doc;
  for (int depth = 0; depth < 4; ++depth) {
    if (!node->is_object() || node->empty()) break;
    auto it = node->begin();
    std::advance(it, std::uniform_int_distribution<size_t>(0, node->size() - 1)(rng));
    if (!it->is_object() || rng() % 3 == 0) {
      *it = value;
      return;
    }
    node = &*it;
  }
  if (node->is_object()) (*node)["stage3_prefetch_bucket_size"] = value;
}

TEST_CASE("mutated examples give a config that round-trips or an InputError", "[zero_config]") {
  // A small, deterministic fuzz: any JSON must give a value or an InputError, and any value
  // must survive ds_config_to_json and validate_ds_config.
  const json values[] = {nullptr,
                         "auto",
                         "x",
                         true,
                         false,
                         0,
                         -1,
                         1,
                         3,
                         4,
                         0.5,
                         1e30,
                         -1e300,
                         9223372036854775807LL,
                         18446744073709551615ULL,
                         json::array(),
                         json::object(),
                         json{{"device", "nvme"}},
                         json{{"enabled", true}}};
  std::vector<json> docs;
  for (const char* name : kExamples) docs.push_back(load_json_file(example_path(name)));
  std::mt19937 rng(20240601);
  int parsed = 0;
  for (int i = 0; i < 3000; ++i) {
    json doc = docs[rng() % docs.size()];
    for (int k = 0; k <= static_cast<int>(rng() % 3); ++k) {
      mutate(doc, rng, values[rng() % std::size(values)]);
    }
    DsConfig c;
    try {
      c = parse(doc);
    } catch (const InputError&) {
      continue;
    }
    ++parsed;
    INFO(doc.dump());
    CHECK_NOTHROW(validate_ds_config(c, 8, "fuzz"));
    check_round_trip(c);
  }
  CHECK(parsed > 100);
}

}  // namespace
}  // namespace zplan::sim
