// Tests of reading, checking and writing ds_config.json (sim/zero_config.h) against DeepSpeed
// 0.19's own rules (reference/deepspeed_internals.md §1).
#include "sim/zero_config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "models/input_error.h"
#include "models/json_reader.h"

namespace zplan::sim {
namespace {

using Catch::Matchers::Contains;
using nlohmann::json;

constexpr int64_t kHidden = 6144;  // GPT-NeoX-20B

const char* const kExamples[] = {"zero0_bf16.json",
                                 "zero1.json",
                                 "zero2.json",
                                 "zero2_offload_cpu.json",
                                 "zero2_checkpointing.json",
                                 "zero3.json",
                                 "zero3_offload_optimizer_cpu.json",
                                 "zero3_offload_all_cpu.json",
                                 "zero3_offload_nvme.json",
                                 "zero3_hf_auto.json"};

std::string example_path(const std::string& name) {
  return std::string(ZPLAN_SOURCE_DIR) + "/examples/ds_configs/" + name;
}

ParseContext context8() {
  ParseContext c;
  c.dp_world_size = 8;
  c.hidden_size = kHidden;
  return c;
}

DsConfig parse(const json& j, const ParseContext& context = context8()) {
  return parse_ds_config(j, "t.json", context);
}

// A minimal valid ds_config (micro-batch 1) with the given zero_optimization block.
json with_zero(json zero) {
  return {{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", std::move(zero)}};
}

// The one-line InputError parsing `j` gives; fails the test when it parses.
std::string error_of(const json& j, const ParseContext& context = context8()) {
  try {
    parse(j, context);
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("parsed without an error: " << j.dump());
  return "";
}

json merged(json a, const json& b) {
  a.update(b);
  return a;
}

std::string validate_error(const DsConfig& c, int dp = 8) {
  try {
    validate_ds_config(c, dp, "planner");
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("validated without an error");
  return "";
}

// The first difference between two configs ("" when equal), comparing what DeepSpeed would do:
// the rest of an offload block with device "none" and of a disabled activation_checkpointing
// block are ignored, as nothing reads them.
std::string difference(const DsConfig& a, const DsConfig& b) {
  std::ostringstream out;
  auto cmp = [&](const char* name, const auto& x, const auto& y) {
    if (out.tellp() == 0 && !(x == y)) out << name << " differs";
  };
  const ZeroConfig& za = a.zero;
  const ZeroConfig& zb = b.zero;
  cmp("stage", za.stage, zb.stage);
  cmp("contiguous_gradients", za.contiguous_gradients, zb.contiguous_gradients);
  cmp("reduce_scatter", za.reduce_scatter, zb.reduce_scatter);
  cmp("reduce_bucket_size", za.reduce_bucket_size, zb.reduce_bucket_size);
  cmp("use_multi_rank_bucket_allreduce", za.use_multi_rank_bucket_allreduce,
      zb.use_multi_rank_bucket_allreduce);
  cmp("allgather_bucket_size", za.allgather_bucket_size, zb.allgather_bucket_size);
  cmp("overlap_comm", za.overlap_comm, zb.overlap_comm);
  cmp("round_robin_gradients", za.round_robin_gradients, zb.round_robin_gradients);
  cmp("sub_group_size", za.sub_group_size, zb.sub_group_size);
  cmp("prefetch_bucket_size", za.prefetch_bucket_size, zb.prefetch_bucket_size);
  cmp("param_persistence_threshold", za.param_persistence_threshold,
      zb.param_persistence_threshold);
  cmp("model_persistence_threshold", za.model_persistence_threshold,
      zb.model_persistence_threshold);
  cmp("max_live_parameters", za.max_live_parameters, zb.max_live_parameters);
  cmp("max_reuse_distance", za.max_reuse_distance, zb.max_reuse_distance);
  cmp("zero.other", za.other, zb.other);
  const OffloadParamConfig& pa = za.offload_param;
  const OffloadParamConfig& pb = zb.offload_param;
  cmp("offload_param.device", pa.device, pb.device);
  if (pa.device != OffloadDevice::kNone) {
    cmp("offload_param.nvme_path", pa.nvme_path, pb.nvme_path);
    cmp("offload_param.buffer_count", pa.buffer_count, pb.buffer_count);
    cmp("offload_param.buffer_size", pa.buffer_size, pb.buffer_size);
    cmp("offload_param.max_in_cpu", pa.max_in_cpu, pb.max_in_cpu);
    cmp("offload_param.pin_memory", pa.pin_memory, pb.pin_memory);
  }
  const OffloadOptimizerConfig& oa = za.offload_optimizer;
  const OffloadOptimizerConfig& ob = zb.offload_optimizer;
  cmp("offload_optimizer.device", oa.device, ob.device);
  if (oa.device != OffloadDevice::kNone) {
    cmp("offload_optimizer.nvme_path", oa.nvme_path, ob.nvme_path);
    cmp("offload_optimizer.buffer_count", oa.buffer_count, ob.buffer_count);
    cmp("offload_optimizer.pin_memory", oa.pin_memory, ob.pin_memory);
    cmp("offload_optimizer.pipeline_read", oa.pipeline_read, ob.pipeline_read);
    cmp("offload_optimizer.pipeline_write", oa.pipeline_write, ob.pipeline_write);
    cmp("offload_optimizer.fast_init", oa.fast_init, ob.fast_init);
    cmp("offload_optimizer.ratio", oa.ratio, ob.ratio);
  }
  cmp("train_batch_size", a.train_batch_size, b.train_batch_size);
  cmp("micro_batch", a.micro_batch, b.micro_batch);
  cmp("gradient_accumulation_steps", a.gradient_accumulation_steps, b.gradient_accumulation_steps);
  cmp("precision", a.precision, b.precision);
  cmp("grad_accum_dtype", a.grad_accum_dtype, b.grad_accum_dtype);
  const ActivationCheckpointingConfig& aa = a.activation_checkpointing;
  const ActivationCheckpointingConfig& ab = b.activation_checkpointing;
  cmp("activation_checkpointing.enabled", aa.enabled, ab.enabled);
  if (aa.enabled) {
    cmp("partition_activations", aa.partition_activations, ab.partition_activations);
    cmp("cpu_checkpointing", aa.cpu_checkpointing, ab.cpu_checkpointing);
    cmp("contiguous_memory_optimization", aa.contiguous_memory_optimization,
        ab.contiguous_memory_optimization);
    cmp("number_checkpoints", aa.number_checkpoints, ab.number_checkpoints);
    cmp("synchronize_checkpoint_boundary", aa.synchronize_checkpoint_boundary,
        ab.synchronize_checkpoint_boundary);
    cmp("profile", aa.profile, ab.profile);
  }
  cmp("aio.block_size", a.aio.block_size, b.aio.block_size);
  cmp("aio.queue_depth", a.aio.queue_depth, b.aio.queue_depth);
  cmp("aio.intra_op_parallelism", a.aio.intra_op_parallelism, b.aio.intra_op_parallelism);
  cmp("aio.single_submit", a.aio.single_submit, b.aio.single_submit);
  cmp("aio.overlap_events", a.aio.overlap_events, b.aio.overlap_events);
  cmp("aio.use_gds", a.aio.use_gds, b.aio.use_gds);
  cmp("gradient_clipping", a.gradient_clipping, b.gradient_clipping);
  cmp("other", a.other, b.other);
  return out.str();
}

// Writes `c`, reads it back, and checks nothing changed; returns the written JSON.
json check_round_trip(const DsConfig& c, int dp = 8) {
  json written = ds_config_to_json(c);
  ParseContext context;
  context.dp_world_size = dp;
  DsConfig back = parse_ds_config(written, "written.json", context);
  INFO(written.dump(2));
  CHECK(difference(c, back) == "");
  CHECK(ds_config_to_json(back) == written);
  return written;
}

// Every key DeepSpeed 0.19.6's DeepSpeedZeroConfig accepts under its JSON name.
const std::vector<std::string> kDeepSpeedZeroKeys = {"stage",
                                                     "contiguous_gradients",
                                                     "reduce_scatter",
                                                     "reduce_bucket_size",
                                                     "use_multi_rank_bucket_allreduce",
                                                     "allgather_partitions",
                                                     "allgather_bucket_size",
                                                     "overlap_comm",
                                                     "load_from_fp32_weights",
                                                     "elastic_checkpoint",
                                                     "offload_param",
                                                     "offload_optimizer",
                                                     "zenflow",
                                                     "sub_group_size",
                                                     "cpu_offload_param",
                                                     "cpu_offload_use_pin_memory",
                                                     "cpu_offload",
                                                     "stage3_prefetch_bucket_size",
                                                     "stage3_param_persistence_threshold",
                                                     "stage3_model_persistence_threshold",
                                                     "stage3_max_live_parameters",
                                                     "stage3_max_reuse_distance",
                                                     "stage3_gather_16bit_weights_on_model_save",
                                                     "stage3_module_granularity_threshold",
                                                     "stage3_use_all_reduce_for_fetch_params",
                                                     "stage3_allgather_sequential",
                                                     "stage3_gather_fp16_weights_on_model_save",
                                                     "ignore_unused_parameters",
                                                     "legacy_stage1",
                                                     "round_robin_gradients",
                                                     "zero_hpz_partition_size",
                                                     "zero_quantized_weights",
                                                     "zero_quantized_nontrainable_weights",
                                                     "zero_quantized_gradients",
                                                     "zeropp_loco_param",
                                                     "mics_shard_size",
                                                     "mics_hierarchical_params_gather",
                                                     "memory_efficient_linear",
                                                     "pipeline_loading_checkpoint",
                                                     "override_module_apply",
                                                     "log_trace_cache_warnings",
                                                     "enable_sanity_checks",
                                                     "save_muon_momentum_buffer_in_memory",
                                                     "leaf_module"};

void check_only_known_zero_keys(const json& written) {
  for (const auto& [key, value] : written.at("zero_optimization").items()) {
    INFO(key);
    CHECK(std::find(kDeepSpeedZeroKeys.begin(), kDeepSpeedZeroKeys.end(), key) !=
          kDeepSpeedZeroKeys.end());
  }
}

// A config as the planner builds one: DeepSpeed's defaults plus the given stage.
DsConfig built(int stage) {
  DsConfig c;
  c.zero.stage = stage;
  c.zero.overlap_comm = stage == 3;
  c.train_batch_size = 64;
  c.micro_batch = 4;
  c.gradient_accumulation_steps = 2;
  c.precision = Precision::kBf16;
  c.grad_accum_dtype = Precision::kBf16;
  return c;
}

TEST_CASE("precision and device names and sizes", "[zero_config]") {
  CHECK(std::string(precision_name(Precision::kFp16)) == "fp16");
  CHECK(std::string(precision_name(Precision::kBf16)) == "bf16");
  CHECK(std::string(precision_name(Precision::kFp32)) == "fp32");
  CHECK(std::string(offload_device_name(OffloadDevice::kNone)) == "none");
  CHECK(std::string(offload_device_name(OffloadDevice::kCpu)) == "cpu");
  CHECK(std::string(offload_device_name(OffloadDevice::kNvme)) == "nvme");
  CHECK(precision_bytes(Precision::kFp16) == 2);
  CHECK(precision_bytes(Precision::kBf16) == 2);
  CHECK(precision_bytes(Precision::kFp32) == 4);
}

TEST_CASE("every default is DeepSpeed 0.19's code default", "[zero_config]") {
  // reference §1.1 (deepspeed/runtime/zero/config.py, offload_config.py). Where the docs
  // disagree the code wins: stage3_prefetch_bucket_size is 5e7 (docs table: 5e8),
  // stage3_param_persistence_threshold 1e5 (docs example: 1e6), sub_group_size 1e9 (docs
  // example: 1e12), overlap_comm true for stage 3 only (docs: false), offload device "none"
  // (docs: cpu), pin_memory true (false before 0.19.5).
  DsConfig c = parse({{"train_micro_batch_size_per_gpu", 1}});
  const ZeroConfig& z = c.zero;
  CHECK(z.stage == 0);
  CHECK(z.contiguous_gradients);
  CHECK(z.reduce_scatter);
  CHECK(z.reduce_bucket_size == 500'000'000);
  CHECK(z.use_multi_rank_bucket_allreduce);
  CHECK(z.allgather_bucket_size == 500'000'000);
  CHECK_FALSE(z.overlap_comm);
  CHECK_FALSE(z.round_robin_gradients);
  CHECK(z.sub_group_size == 1'000'000'000);
  CHECK(z.prefetch_bucket_size == 50'000'000);
  CHECK(z.param_persistence_threshold == 100'000);
  CHECK(z.model_persistence_threshold == std::numeric_limits<int64_t>::max());  // sys.maxsize
  CHECK(z.max_live_parameters == 1'000'000'000);
  CHECK(z.max_reuse_distance == 1'000'000'000);
  CHECK(z.other == json::object());

  const OffloadParamConfig& p = z.offload_param;
  CHECK(p.device == OffloadDevice::kNone);
  CHECK(p.nvme_path.empty());
  CHECK(p.buffer_count == 5);
  CHECK(p.buffer_size == 100'000'000);
  CHECK(p.max_in_cpu == 1'000'000'000);
  CHECK(p.pin_memory);
  const OffloadOptimizerConfig& o = z.offload_optimizer;
  CHECK(o.device == OffloadDevice::kNone);
  CHECK(o.buffer_count == 4);
  CHECK(o.pin_memory);
  CHECK_FALSE(o.pipeline_read);
  CHECK_FALSE(o.pipeline_write);
  CHECK_FALSE(o.fast_init);
  CHECK(o.ratio == 1.0);

  // The defaults inside an offload block given with only its device.
  DsConfig s3 = parse(with_zero({{"stage", 3},
                                 {"offload_param", {{"device", "nvme"}, {"nvme_path", "/n"}}},
                                 {"offload_optimizer", {{"device", "cpu"}}}}));
  CHECK(s3.zero.offload_param.buffer_count == 5);
  CHECK(s3.zero.offload_param.buffer_size == 100'000'000);
  CHECK(s3.zero.offload_param.max_in_cpu == 1'000'000'000);
  CHECK(s3.zero.offload_param.pin_memory);
  CHECK(s3.zero.offload_optimizer.buffer_count == 4);
  CHECK(s3.zero.offload_optimizer.pin_memory);

  // aio (§1.2), activation_checkpointing (§1.5), the rest of the top level (§1.3, §1.4).
  CHECK(c.aio.block_size == 1'048'576);
  CHECK(c.aio.queue_depth == 8);
  CHECK(c.aio.intra_op_parallelism == 1);
  CHECK_FALSE(c.aio.single_submit);
  CHECK(c.aio.overlap_events);
  CHECK_FALSE(c.aio.use_gds);
  CHECK_FALSE(c.activation_checkpointing.enabled);
  CHECK(c.gradient_clipping == 1.0);
  CHECK(c.precision == Precision::kFp32);
  CHECK(c.grad_accum_dtype == Precision::kFp32);
  CHECK(c.other == json::object());

  DsConfig ac =
      parse({{"train_micro_batch_size_per_gpu", 1}, {"activation_checkpointing", json::object()}});
  const ActivationCheckpointingConfig& a = ac.activation_checkpointing;
  CHECK(a.enabled);
  CHECK_FALSE(a.partition_activations);
  CHECK_FALSE(a.cpu_checkpointing);
  CHECK_FALSE(a.contiguous_memory_optimization);
  CHECK_FALSE(a.number_checkpoints.has_value());
  CHECK_FALSE(a.synchronize_checkpoint_boundary);
  CHECK_FALSE(a.profile);
}

TEST_CASE("overlap_comm defaults to true for stage 3 only", "[zero_config]") {
  for (int stage = 0; stage <= 3; ++stage) {
    INFO("stage " << stage);
    CHECK(parse(with_zero({{"stage", stage}})).zero.overlap_comm == (stage == 3));
    CHECK(parse(with_zero({{"stage", stage}, {"overlap_comm", nullptr}})).zero.overlap_comm ==
          (stage == 3));
    CHECK(parse(with_zero({{"stage", stage}, {"overlap_comm", "auto"}})).zero.overlap_comm ==
          (stage == 3));
  }
  CHECK_FALSE(parse(with_zero({{"stage", 3}, {"overlap_comm", false}})).zero.overlap_comm);
  CHECK(parse(with_zero({{"stage", 1}, {"overlap_comm", true}})).zero.overlap_comm);
}

TEST_CASE("stage accepts integers 0-3, also written as 3.0", "[zero_config]") {
  CHECK(parse(with_zero({{"stage", 3.0}})).zero.stage == 3);
  CHECK(parse(with_zero({{"stage", "auto"}})).zero.stage == 0);
  CHECK(parse(with_zero({{"reduce_bucket_size", 5e8}})).zero.reduce_bucket_size == 500'000'000);
}

TEST_CASE("\"auto\" in zero_optimization is filled as the Hugging Face Trainer does",
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

TEST_CASE("\"auto\" batch keys, precision and clipping follow the command line or the Trainer",
          "[zero_config]") {
  json j = {{"train_batch_size", "auto"},
            {"train_micro_batch_size_per_gpu", "auto"},
            {"gradient_accumulation_steps", "auto"},
            {"gradient_clipping", "auto"},
            {"fp16", {{"enabled", "auto"}}},
            {"bf16", {{"enabled", "auto"}}}};
  SECTION("the Trainer's defaults: micro-batch 8, accumulation 1, clipping 1.0") {
    DsConfig c = parse(j);
    CHECK(c.micro_batch == 8);
    CHECK(c.gradient_accumulation_steps == 1);
    CHECK(c.train_batch_size == 64);
    CHECK(c.gradient_clipping == 1.0);
    CHECK(c.precision == Precision::kBf16);  // ParseContext::auto_precision's default
  }
  SECTION("command-line values") {
    ParseContext context = context8();
    context.micro_batch = 2;
    context.gradient_accumulation_steps = 4;
    context.auto_precision = Precision::kFp16;
    DsConfig c = parse(j, context);
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
  }
  SECTION("\"auto\" train batch with a micro-batch in the file") {
    DsConfig c = parse({{"train_batch_size", "auto"}, {"train_micro_batch_size_per_gpu", 2}});
    CHECK(c.train_batch_size == 16);
    CHECK(c.gradient_accumulation_steps == 1);
  }
}

TEST_CASE("batch keys follow DeepSpeed's _set_batch_related_parameters", "[zero_config]") {
  auto batch = [](json j) {
    DsConfig c = parse(j);
    return std::vector<int64_t>{c.train_batch_size, c.micro_batch, c.gradient_accumulation_steps};
  };
  using V = std::vector<int64_t>;
  // Two of them determine the third: train = micro x gas x 8.
  CHECK(batch({{"train_batch_size", 64},
               {"train_micro_batch_size_per_gpu", 2},
               {"gradient_accumulation_steps", 4}}) == V{64, 2, 4});
  CHECK(batch({{"train_batch_size", 64}, {"train_micro_batch_size_per_gpu", 2}}) == V{64, 2, 4});
  CHECK(batch({{"train_batch_size", 64}, {"gradient_accumulation_steps", 2}}) == V{64, 4, 2});
  CHECK(batch({{"train_micro_batch_size_per_gpu", 2}, {"gradient_accumulation_steps", 3}}) ==
        V{48, 2, 3});
  // Only train: accumulation 1, micro = train / GPUs. Only micro: accumulation 1.
  CHECK(batch({{"train_batch_size", 32}}) == V{32, 4, 1});
  CHECK(batch({{"train_micro_batch_size_per_gpu", 3}}) == V{24, 3, 1});
  CHECK(batch({{"train_micro_batch_size_per_gpu", 3.0}, {"train_batch_size", nullptr}}) ==
        V{24, 3, 1});

  SECTION("inconsistent keys are an error at /train_batch_size") {
    CHECK_THAT(error_of({{"train_batch_size", 65},
                         {"train_micro_batch_size_per_gpu", 2},
                         {"gradient_accumulation_steps", 4}}),
               Contains("t.json: /train_batch_size: train_batch_size 65 must equal"));
    // DeepSpeed derives accumulation as 100 // 4 // 8 = 3 and fails on 4 x 3 x 8 = 96; the
    // message says why: the division does not come out even.
    CHECK(error_of({{"train_batch_size", 100}, {"train_micro_batch_size_per_gpu", 4}}) ==
          "t.json: /train_batch_size: train_batch_size 100 is not a multiple of "
          "train_micro_batch_size_per_gpu 4 x 8 data-parallel GPUs = 32");
    CHECK(error_of({{"train_batch_size", 100}, {"gradient_accumulation_steps", 4}}) ==
          "t.json: /train_batch_size: train_batch_size 100 is not a multiple of "
          "gradient_accumulation_steps 4 x 8 data-parallel GPUs = 32");
    // Fewer samples than GPUs: micro would derive to 0.
    CHECK(error_of({{"train_batch_size", 4}}) ==
          "t.json: /train_batch_size: train_batch_size 4 is not a multiple of the 8 data-parallel "
          "GPUs");
    CHECK_THAT(error_of({{"train_batch_size", 12}}), Contains("/train_batch_size"));
  }
  SECTION("neither train_batch_size nor the micro-batch is an error") {
    CHECK_THAT(error_of(json::object()), Contains("t.json: gives neither train_batch_size"));
    CHECK_THAT(error_of({{"gradient_accumulation_steps", 2}}), Contains("neither"));
  }
  SECTION("values must be positive integers") {
    CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", 0}}),
               Contains("t.json: /train_micro_batch_size_per_gpu: must be a positive integer"));
    CHECK_THAT(error_of({{"train_batch_size", -8}}), Contains("/train_batch_size"));
    CHECK_THAT(
        error_of({{"train_micro_batch_size_per_gpu", 1}, {"gradient_accumulation_steps", 0}}),
        Contains("/gradient_accumulation_steps"));
    CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", "4"}}),
               Contains("/train_micro_batch_size_per_gpu: must be an integer"));
    CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", 1.5}}),
               Contains("/train_micro_batch_size_per_gpu"));
    // Counts whose products still fit 64 bits but no real run has (negative step times before).
    CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", 1},
                         {"gradient_accumulation_steps", 1'000'000'000'000LL}}),
               Contains("/gradient_accumulation_steps: 1000000000000 is more than the 1000000"));
    CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", 1'000'000'000}}),
               Contains("/train_micro_batch_size_per_gpu: 1000000000 is more than the 1000000"));
    CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", 4'000'000'000'000LL},
                         {"gradient_accumulation_steps", 4'000'000'000'000LL}}),
               Contains("too large"));
  }
  SECTION("command-line values fill missing keys and must agree with the file") {
    ParseContext context = context8();
    context.micro_batch = 2;
    DsConfig c = parse({{"train_batch_size", 64}}, context);
    CHECK(c.gradient_accumulation_steps == 4);
    CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", 4}}, context),
               Contains("t.json: /train_micro_batch_size_per_gpu: is 4 in the file, but "
                        "--micro-batch says 2"));
    ParseContext gas = context8();
    gas.gradient_accumulation_steps = 3;
    CHECK_THAT(
        error_of({{"train_micro_batch_size_per_gpu", 4}, {"gradient_accumulation_steps", 2}}, gas),
        Contains("/gradient_accumulation_steps: is 2 in the file, but --gas says 3"));
    ParseContext global = context8();
    global.train_batch_size = 128;
    CHECK_THAT(error_of({{"train_batch_size", 64}}, global), Contains("--global-batch"));
    ParseContext bad = context8();
    bad.micro_batch = 0;
    CHECK_THAT(error_of({{"train_batch_size", 64}}, bad), Contains("--micro-batch: must be"));
    // A mismatch made by a command-line value names the flag in the message.
    ParseContext m3 = context8();
    m3.micro_batch = 3;
    CHECK_THAT(error_of({{"train_batch_size", 100}}, m3), Contains("(--micro-batch)"));
  }
  SECTION("a data-parallel world below 1 is an error") {
    ParseContext zero = context8();
    zero.dp_world_size = 0;
    CHECK_THAT(error_of({{"train_batch_size", 64}}, zero), Contains("t.json: the data-parallel"));
  }
}

TEST_CASE("rejected zero_optimization values name the file and the JSON pointer", "[zero_config]") {
  const std::string z = "t.json: /zero_optimization/";
  SECTION("stage") {
    CHECK_THAT(error_of(with_zero({{"stage", 4}})), Contains(z + "stage: must be a ZeRO stage"));
    CHECK_THAT(error_of(with_zero({{"stage", -1}})), Contains(z + "stage"));
    CHECK_THAT(error_of(with_zero({{"stage", true}})), Contains(z + "stage: must be an integer"));
    CHECK_THAT(error_of(with_zero({{"stage", "3"}})), Contains(z + "stage"));
    CHECK_THAT(error_of(with_zero({{"stage", nullptr}})),
               Contains(z + "stage: must be an integer, got null"));
    CHECK_THAT(error_of(with_zero({{"stage", 2.5}})), Contains(z + "stage"));
  }
  SECTION("sizes: negative or zero") {
    for (const char* key : {"reduce_bucket_size", "allgather_bucket_size", "sub_group_size",
                            "stage3_prefetch_bucket_size"}) {
      INFO(key);
      CHECK_THAT(error_of(with_zero({{"stage", 3}, {key, -1}})),
                 Contains(z + key + ": must not be negative"));
      // A prefetch bucket of 0 means "no prefetch"; zero-sized buckets and sub-groups are errors.
      if (std::string(key) == "stage3_prefetch_bucket_size") continue;
      CHECK_THAT(error_of(with_zero({{"stage", 3}, {key, 0}})),
                 Contains(z + key + ": must be a positive number of elements"));
    }
  }
  SECTION("thresholds: negative") {
    for (const char* key :
         {"stage3_param_persistence_threshold", "stage3_model_persistence_threshold",
          "stage3_max_live_parameters", "stage3_max_reuse_distance"}) {
      INFO(key);
      CHECK_THAT(error_of(with_zero({{"stage", 3}, {key, -5}})),
                 Contains(z + key + ": must not be negative"));
      CHECK(parse(with_zero({{"stage", 3}, {key, 0}})).zero.stage == 3);
    }
  }
  SECTION("offload_param needs stage 3") {
    for (int stage : {0, 1, 2}) {
      CHECK_THAT(error_of(with_zero({{"stage", stage}, {"offload_param", {{"device", "cpu"}}}})),
                 Contains(z + "offload_param/device: parameter offload is valid only with ZeRO "
                              "stage 3"));
    }
    CHECK(parse(with_zero({{"stage", 2}, {"offload_param", {{"device", "none"}}}}))
              .zero.offload_param.device == OffloadDevice::kNone);
  }
  SECTION("NVMe optimizer offload needs stage 3; any optimizer offload needs ZeRO") {
    json nvme = {{"device", "nvme"}, {"nvme_path", "/local_nvme"}};
    CHECK_THAT(error_of(with_zero({{"stage", 2}, {"offload_optimizer", nvme}})),
               Contains(z + "offload_optimizer/device: NVMe optimizer offload needs ZeRO stage 3"));
    CHECK_THAT(error_of(with_zero({{"stage", 0}, {"offload_optimizer", {{"device", "cpu"}}}})),
               Contains(z + "offload_optimizer/device: optimizer offload needs ZeRO stage"));
  }
  SECTION("ratio") {
    auto opt = [](double ratio) { return json{{"device", "cpu"}, {"ratio", ratio}}; };
    CHECK_THAT(error_of(with_zero({{"stage", 3}, {"offload_optimizer", opt(1.5)}})),
               Contains(z + "offload_optimizer/ratio: must be between 0 and 1"));
    CHECK_THAT(error_of(with_zero({{"stage", 3}, {"offload_optimizer", opt(-0.1)}})),
               Contains(z + "offload_optimizer/ratio"));
    CHECK_THAT(error_of(with_zero({{"stage", 2}, {"offload_optimizer", opt(0.5)}})),
               Contains(z + "offload_optimizer/ratio: partial offload"));
    // offload_ratio_check runs whatever the device.
    CHECK_THAT(error_of(with_zero(
                   {{"stage", 2}, {"offload_optimizer", {{"device", "none"}, {"ratio", 0.5}}}})),
               Contains(z + "offload_optimizer/ratio"));
    CHECK(parse(with_zero({{"stage", 3}, {"offload_optimizer", opt(0.5)}}))
              .zero.offload_optimizer.ratio == 0.5);
  }
  SECTION("NVMe without nvme_path, buffer counts below 1") {
    CHECK_THAT(error_of(with_zero({{"stage", 3}, {"offload_param", {{"device", "nvme"}}}})),
               Contains(z + "offload_param/nvme_path: is needed"));
    CHECK_THAT(
        error_of(with_zero(
            {{"stage", 3}, {"offload_optimizer", {{"device", "nvme"}, {"nvme_path", nullptr}}}})),
        Contains(z + "offload_optimizer/nvme_path: is needed"));
    CHECK_THAT(error_of(with_zero(
                   {{"stage", 3}, {"offload_param", {{"device", "cpu"}, {"buffer_count", 0}}}})),
               Contains(z + "offload_param/buffer_count: must be at least 1"));
    CHECK_THAT(
        error_of(with_zero(
            {{"stage", 3}, {"offload_optimizer", {{"device", "cpu"}, {"buffer_count", 0}}}})),
        Contains(z + "offload_optimizer/buffer_count: must be at least 1"));
    CHECK_THAT(error_of(with_zero(
                   {{"stage", 3}, {"offload_param", {{"device", "cpu"}, {"buffer_size", -1}}}})),
               Contains(z + "offload_param/buffer_size: must not be negative"));
  }
  SECTION("unknown keys (pydantic extra=\"forbid\"), with a suggestion for near misses") {
    CHECK_THAT(
        error_of(with_zero({{"stage", 2}, {"overlap_com", true}})),
        Contains(z + "overlap_com: unknown key") && Contains("did you mean \"overlap_comm\""));
    CHECK_THAT(error_of(with_zero({{"allgather_size", 5}})), Contains(z + "allgather_size"));
    CHECK_THAT(
        error_of(with_zero({{"stage", 3}, {"offload_param", {{"device", "cpu"}, {"nvme", "/x"}}}})),
        Contains(z + "offload_param/nvme: unknown key"));
    CHECK_THAT(error_of(with_zero(
                   {{"stage", 3}, {"offload_optimizer", {{"device", "cpu"}, {"ratios", 1}}}})),
               Contains(z + "offload_optimizer/ratios: unknown key"));
    // Inside the offload blocks "auto" is not dropped: nested pydantic models see the string.
    CHECK_THAT(error_of(with_zero(
                   {{"stage", 3}, {"offload_param", {{"device", "cpu"}, {"pin_memory", "auto"}}}})),
               Contains(z + "offload_param/pin_memory: \"auto\" is not accepted"));
    CHECK_THAT(error_of(with_zero(
                   {{"stage", 3}, {"offload_param", {{"device", "cpu"}, {"foo", "auto"}}}})),
               Contains(z + "offload_param/foo: unknown key"));
  }
  SECTION("wrong types") {
    CHECK_THAT(error_of(with_zero({{"overlap_comm", "yes"}})),
               Contains(z + "overlap_comm: must be true or false"));
    CHECK_THAT(error_of(with_zero({{"contiguous_gradients", nullptr}})),
               Contains(z + "contiguous_gradients: must be true or false, got null"));
    CHECK_THAT(error_of(with_zero({{"reduce_bucket_size", "5e8"}})),
               Contains(z + "reduce_bucket_size: must be an integer"));
    CHECK_THAT(error_of(with_zero({{"reduce_bucket_size", 5.5}})),
               Contains(z + "reduce_bucket_size"));
    CHECK_THAT(error_of(with_zero({{"stage", 3}, {"offload_param", 5}})),
               Contains(z + "offload_param: must be an object"));
    CHECK_THAT(error_of(with_zero({{"stage", 3}, {"offload_param", {{"device", "gpu"}}}})),
               Contains(z + "offload_param/device: must be \"none\", \"cpu\" or \"nvme\""));
    CHECK_THAT(error_of(with_zero(
                   {{"stage", 3}, {"offload_param", {{"device", "cpu"}, {"nvme_path", 5}}}})),
               Contains(z + "offload_param/nvme_path: must be a string"));
    CHECK_THAT(error_of(with_zero({{"zero_hpz_partition_size", -1}})),
               Contains(z + "zero_hpz_partition_size: must not be negative"));
    CHECK_THAT(error_of(with_zero({{"zenflow", 3}})), Contains(z + "zenflow: must be an object"));
    CHECK_THAT(error_of(with_zero({{"allgather_partitions", 1}})),
               Contains(z + "allgather_partitions"));
    CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", "3"}}),
               Contains("t.json: /zero_optimization: must be an object"));
    CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", nullptr}}),
               Contains("t.json: /zero_optimization"));
    CHECK_THAT(error_of(json::array()), Contains("t.json: a ds_config must be a JSON object"));
  }
  SECTION("both spellings of one field, legacy_stage1") {
    CHECK_THAT(
        error_of(with_zero(
            {{"stage", 3}, {"stage3_prefetch_bucket_size", 1000}, {"prefetch_bucket_size", 2000}})),
        Contains("is given twice"));
    CHECK_THAT(error_of(with_zero({{"legacy_stage1", true}})),
               Contains(z + "legacy_stage1: the legacy ZeRO stage 1 was removed"));
    CHECK(parse(with_zero({{"legacy_stage1", false}})).zero.other["legacy_stage1"] == false);
  }
}

TEST_CASE("other rejected top-level values", "[zero_config]") {
  const json base = {{"train_micro_batch_size_per_gpu", 1}};
  auto with = [&](const char* key, json value) {
    json j = base;
    j[key] = std::move(value);
    return j;
  };
  CHECK_THAT(error_of(merged(with("fp16", {{"enabled", true}}), {{"bf16", {{"enabled", true}}}})),
             Contains("t.json: /bf16: bf16 and fp16 cannot both be enabled"));
  CHECK_THAT(
      error_of(merged(with("fp16", {{"enabled", true}}), {{"bfloat16", {{"enabled", true}}}})),
      Contains("t.json: /bfloat16: bf16 and fp16"));
  {
    ParseContext fp16 = context8();
    fp16.auto_precision = Precision::kFp16;
    CHECK_THAT(
        error_of(merged(with("fp16", {{"enabled", "auto"}}), {{"bf16", {{"enabled", true}}}}),
                 fp16),
        Contains("\"enabled\": \"auto\" follows"));
  }
  CHECK_THAT(error_of(with("fp16", {{"enabled", true}, {"loss_scaling", 0}})),
             Contains("t.json: /fp16/loss_scaling: unknown key"));
  CHECK_THAT(error_of(with("bf16", {{"enabled", true}, {"immediate_grad_updates", true}})),
             Contains("t.json: /bf16/immediate_grad_updates: unknown key") &&
                 Contains("did you mean \"immediate_grad_update\""));
  CHECK_THAT(error_of(with("fp16", {{"enabled", "true"}})),
             Contains("t.json: /fp16/enabled: must be true or false"));
  CHECK_THAT(error_of(with("fp16", nullptr)), Contains("t.json: /fp16: must be an object"));
  CHECK_THAT(error_of(with("fp16", {{"enabled", true}, {"loss_scale", -1}})),
             Contains("t.json: /fp16/loss_scale: must not be negative"));
  CHECK_THAT(error_of(with("fp16", {{"enabled", true}, {"loss_scale_window", 0}})),
             Contains("t.json: /fp16/loss_scale_window: must be positive with dynamic"));
  CHECK(parse(with("fp16", {{"enabled", true}, {"loss_scale", 128}, {"loss_scale_window", 0}}))
            .precision == Precision::kFp16);
  CHECK_THAT(error_of(with("fp16", {{"fp16_master_weights_and_grads", true}})),
             Contains("t.json: /fp16/fp16_master_weights_and_grads: is only supported with ZeRO"));
  CHECK_THAT(error_of(merged(with_zero({{"stage", 1}}),
                             {{"bf16", {{"enabled", true}, {"bf16_optimizer_states", true}}}})),
             Contains("t.json: /bf16/bf16_optimizer_states: requires"));
  CHECK_THAT(error_of(with("activation_checkpointing",
                           {{"contiguous_memory_optimization", true}, {"number_checkpoints", 4}})),
             Contains("t.json: /activation_checkpointing/contiguous_memory_optimization: needs "
                      "partition_activations"));
  CHECK_THAT(error_of(with("activation_checkpointing", {{"contiguous_memory_optimization", true},
                                                        {"partition_activations", true}})),
             Contains("t.json: /activation_checkpointing/contiguous_memory_optimization: needs "
                      "number_checkpoints"));
  CHECK_THAT(error_of(with("activation_checkpointing", {{"number_checkpoints", 0}})),
             Contains("t.json: /activation_checkpointing/number_checkpoints: must be positive"));
  CHECK_THAT(error_of(with("activation_checkpointing", nullptr)),
             Contains("t.json: /activation_checkpointing: must be an object"));
  CHECK_THAT(error_of(with("activation_checkpointing", {{"partition_activations", "auto"}})),
             Contains("t.json: /activation_checkpointing/partition_activations: must be true or "
                      "false"));
  CHECK_THAT(error_of(with("aio", {{"queue_depth", 0}})),
             Contains("t.json: /aio/queue_depth: must be a positive integer"));
  CHECK_THAT(error_of(with("gradient_clipping", -1)),
             Contains("t.json: /gradient_clipping: must be a finite number >= 0"));
  CHECK_THAT(error_of(with("gradient_clipping", "1.0")), Contains("t.json: /gradient_clipping"));
  CHECK_THAT(
      error_of(merged(with_zero({{"stage", 1}}), {{"data_types", {{"grad_accum_dtype", "int8"}}}})),
      Contains("t.json: /data_types/grad_accum_dtype: must be \"fp32\""));
  CHECK_THAT(error_of(with("data_types", nullptr)), Contains("t.json: /data_types"));
  // Without ZeRO DeepSpeed has no optimizer for mixed model / accumulation dtypes.
  CHECK_THAT(error_of(merged(with("bf16", {{"enabled", true}}),
                             {{"data_types", {{"grad_accum_dtype", "fp32"}}}})),
             Contains("t.json: /data_types/grad_accum_dtype: DeepSpeed does not support"));
  CHECK_THAT(error_of(with("communication_data_type", "fp8")),
             Contains("t.json: /communication_data_type: must be"));
}

TEST_CASE("precision blocks and data_types", "[zero_config]") {
  json j = with_zero({{"stage", 2}});
  CHECK(parse(j).precision == Precision::kFp32);
  j["bfloat16"] = {{"enabled", true}};
  DsConfig old_name = parse(j);
  CHECK(old_name.precision == Precision::kBf16);
  CHECK_FALSE(old_name.other.contains("bfloat16"));
  // "bf16" wins over the old name, which DeepSpeed then never reads.
  j["bf16"] = {{"enabled", false}};
  CHECK(parse(j).precision == Precision::kFp32);
  j["data_types"] = {{"grad_accum_dtype", "float32"}, {"param_dtype", "bf16"}};
  j["bf16"] = {{"enabled", true}, {"check_grad_overflow", false}};
  DsConfig c = parse(j);
  CHECK(c.precision == Precision::kBf16);
  CHECK(c.grad_accum_dtype == Precision::kFp32);
  CHECK(c.other["data_types"] == json{{"param_dtype", "bf16"}});
  CHECK(c.other["bf16"] == json{{"check_grad_overflow", false}});
  json written = check_round_trip(c);
  CHECK(written["data_types"]["grad_accum_dtype"] == "fp32");
  CHECK(written["bf16"]["enabled"] == true);
  // fp16 loss-scaling settings stay when fp16 is off ("auto" ones are dropped: defaults).
  json hf = {{"train_micro_batch_size_per_gpu", 1},
             {"fp16", {{"enabled", "auto"}, {"loss_scale", 0}, {"hysteresis", "auto"}}},
             {"bf16", {{"enabled", "auto"}}},
             {"communication_data_type", "BF16"}};
  DsConfig h = parse(hf);
  CHECK(h.precision == Precision::kBf16);
  CHECK(h.other["fp16"] == json{{"loss_scale", 0}});
  CHECK(h.other["communication_data_type"] == "BF16");
  check_round_trip(h);
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
  CHECK_THAT(error_of(with_zero({{"stage", 2}}), flag),
             Contains("t.json: enables neither bf16 nor fp16 (fp32 training), but --precision "
                      "says bf16"));
  // "auto" follows the flag, so it always agrees; without the flag, the file decides.
  json hf = with_zero({{"stage", 2}});
  hf["fp16"] = {{"enabled", "auto"}};
  hf["bf16"] = {{"enabled", "auto"}};
  CHECK(parse(hf, flag).precision == Precision::kBf16);
  CHECK(parse(fp16).precision == Precision::kFp16);
}

TEST_CASE("deprecated aliases are mapped as DeepSpeed maps them", "[zero_config]") {
  SECTION("cpu_offload -> offload_optimizer cpu (and contiguous gradients in stage 1/2)") {
    DsConfig c =
        parse(with_zero({{"stage", 2}, {"cpu_offload", true}, {"contiguous_gradients", false}}));
    CHECK(c.zero.offload_optimizer.device == OffloadDevice::kCpu);
    CHECK(c.zero.offload_optimizer.pin_memory);
    CHECK(c.zero.contiguous_gradients);
    CHECK(parse(with_zero({{"stage", 2}, {"cpu_offload", false}})).zero.offload_optimizer.device ==
          OffloadDevice::kNone);
    CHECK_THAT(
        error_of(with_zero(
            {{"stage", 2}, {"cpu_offload", false}, {"offload_optimizer", {{"device", "cpu"}}}})),
        Contains("t.json: /zero_optimization/cpu_offload: is the deprecated form"));
    CHECK_THAT(error_of(with_zero({{"stage", 0}, {"cpu_offload", true}})),
               Contains("t.json: /zero_optimization/cpu_offload: optimizer offload needs"));
  }
  SECTION("cpu_offload_param -> offload_param cpu") {
    CHECK(parse(with_zero({{"stage", 3}, {"cpu_offload_param", true}})).zero.offload_param.device ==
          OffloadDevice::kCpu);
    CHECK_THAT(error_of(with_zero({{"stage", 2}, {"cpu_offload_param", true}})),
               Contains("t.json: /zero_optimization/cpu_offload_param: parameter offload is "
                        "valid only with ZeRO stage 3"));
  }
  SECTION("cpu_offload_use_pin_memory has no effect and is kept") {
    DsConfig c = parse(with_zero({{"stage", 2}, {"cpu_offload_use_pin_memory", false}}));
    CHECK(c.zero.other == json{{"cpu_offload_use_pin_memory", false}});
    check_round_trip(c);
  }
  SECTION("stage3_gather_fp16_weights_on_model_save -> the 16-bit name") {
    DsConfig c =
        parse(with_zero({{"stage", 3}, {"stage3_gather_fp16_weights_on_model_save", true}}));
    CHECK(c.zero.other == json{{"stage3_gather_16bit_weights_on_model_save", true}});
    CHECK_THAT(error_of(with_zero({{"stage3_gather_fp16_weights_on_model_save", true},
                                   {"gather_16bit_weights_on_model_save", false}})),
               Contains("/zero_optimization/stage3_gather_fp16_weights_on_model_save: is the "
                        "deprecated name"));
  }
  SECTION("pydantic attribute names are accepted and written under the JSON names") {
    DsConfig c = parse(with_zero({{"stage", 3},
                                  {"prefetch_bucket_size", 1234},
                                  {"max_live_parameters", 5678},
                                  {"allgather_sequential", false}}));
    CHECK(c.zero.prefetch_bucket_size == 1234);
    CHECK(c.zero.max_live_parameters == 5678);
    CHECK(c.zero.other == json{{"stage3_allgather_sequential", false}});
    json written = check_round_trip(c);
    CHECK(written["zero_optimization"]["stage3_prefetch_bucket_size"] == 1234);
    // 0 is DeepSpeed's "no prefetch"; a negative size is an error named by its spelling.
    CHECK(parse(with_zero({{"stage", 3}, {"prefetch_bucket_size", 0}})).zero.prefetch_bucket_size ==
          0);
    CHECK_THAT(error_of(with_zero({{"stage", 3}, {"prefetch_bucket_size", -1}})),
               Contains("t.json: /zero_optimization/prefetch_bucket_size: must not be negative"));
  }
  SECTION("the old \"zero_optimization\": true form is stage 1 with allgather_size") {
    DsConfig c = parse({{"train_micro_batch_size_per_gpu", 1},
                        {"zero_optimization", true},
                        {"allgather_size", 2e8}});
    CHECK(c.zero.stage == 1);
    CHECK(c.zero.allgather_bucket_size == 200'000'000);
    CHECK_FALSE(c.zero.overlap_comm);
    CHECK(c.other == json::object());
    CHECK(parse({{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", false}}).zero.stage ==
          0);
    check_round_trip(c);
  }
}

TEST_CASE("values DeepSpeed resolves itself", "[zero_config]") {
  // stage_1_and_2.py: contiguous_gradients or cpu_offload.
  DsConfig s2 = parse(with_zero(
      {{"stage", 1}, {"contiguous_gradients", false}, {"offload_optimizer", {{"device", "cpu"}}}}));
  CHECK(s2.zero.contiguous_gradients);
  CHECK_FALSE(parse(with_zero({{"stage", 3},
                               {"contiguous_gradients", false},
                               {"offload_optimizer", {{"device", "cpu"}}}}))
                  .zero.contiguous_gradients);
  // engine.py: stage3_allgather_sequential sets the prefetch bucket to 1 (not with MiCS).
  json seq = {
      {"stage", 3}, {"stage3_allgather_sequential", true}, {"stage3_prefetch_bucket_size", 5e7}};
  CHECK(parse(with_zero(seq)).zero.prefetch_bucket_size == 1);
  check_round_trip(parse(with_zero(seq)));
  seq["mics_shard_size"] = 8;
  CHECK(parse(with_zero(seq)).zero.prefetch_bucket_size == 50'000'000);
  seq["stage"] = 2;
  seq.erase("mics_shard_size");
  CHECK(parse(with_zero(seq)).zero.prefetch_bucket_size == 50'000'000);
  // An offload block with device "none" is as if absent.
  DsConfig none = parse(with_zero(
      {{"stage", 3},
       {"offload_optimizer", {{"device", "none"}, {"buffer_count", 9}, {"super_offload", true}}}}));
  CHECK(none.zero.offload_optimizer.buffer_count == 4);
  CHECK(none.zero.other == json::object());
}

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
              {"zero_quantized_weights", true},
              {"zero_hpz_partition_size", 8},
              {"stage3_module_granularity_threshold", -1},
              {"leaf_module", {{"classes", "Block"}}},
              {"zeropp_loco_param", nullptr},
              {"offload_optimizer",
               {{"device", "cpu"}, {"super_offload", true}, {"cpuadam_cores_perc", 0.5}}}}}};
  DsConfig c = parse(j);
  CHECK(c.other["optimizer"] == j["optimizer"]);
  CHECK(c.other["steps_per_print"] == 10);
  CHECK(c.other["aio"] == json{{"thread_count", 2}});  // ignored by DeepSpeed since 0.17
  CHECK(c.aio.queue_depth == 32);
  CHECK(c.activation_checkpointing.enabled);
  CHECK(c.other["activation_checkpointing"] == json{{"partitioned_activations", true}});
  CHECK(c.zero.other["zero_quantized_weights"] == true);
  CHECK(c.zero.other["zero_hpz_partition_size"] == 8);
  CHECK(c.zero.other["stage3_module_granularity_threshold"] == -1);
  CHECK(c.zero.other["leaf_module"] == json{{"classes", "Block"}});
  CHECK_FALSE(c.zero.other.contains("zeropp_loco_param"));
  CHECK(c.zero.other["offload_optimizer"] ==
        json{{"super_offload", true}, {"cpuadam_cores_perc", 0.5}});
  json written = check_round_trip(c);
  CHECK(written["optimizer"] == j["optimizer"]);
  CHECK(written["aio"]["thread_count"] == 2);
  CHECK(written["zero_optimization"]["offload_optimizer"]["super_offload"] == true);
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
    CHECK(w["zero_optimization"].contains("overlap_comm"));
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
  CHECK_THAT(err([](DsConfig& c) { c.zero.reduce_bucket_size = 0; }),
             Contains("planner: /zero_optimization/reduce_bucket_size: must be a positive number"));
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
  CHECK_THAT(err([](DsConfig& c) { c.zero.other["zero_quantized_weights"] = 5; }),
             Contains("planner: /zero_optimization/zero_quantized_weights: must be true or"));
  CHECK_THAT(err([](DsConfig& c) {
               c.zero.other["offload_optimizer"] = {{"ratio", 0.5}};
             }),
             Contains("planner: /zero_optimization/offload_optimizer/ratio: is not an"));
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
