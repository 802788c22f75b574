// Helpers of the ds_config tests (zero_config_test.cc reads and rejects, zero_config_write_test.cc
// writes and round-trips): the example files, a parse for 8 GPUs, the first error of a parse, and
// a field-by-field comparison of two configs.
#ifndef ZPLAN_TESTS_SIM_ZERO_CONFIG_TEST_UTIL_H_
#define ZPLAN_TESTS_SIM_ZERO_CONFIG_TEST_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "base/input_error.h"
#include "sim/ds_config/zero_config.h"

namespace zplan::sim::testing {

using nlohmann::json;

inline constexpr int64_t kHidden = 6144;  // GPT-NeoX-20B

inline const char* const kExamples[] = {"zero0_bf16.json",
                                        "zero1.json",
                                        "zero2.json",
                                        "zero2_offload_cpu.json",
                                        "zero2_checkpointing.json",
                                        "zero3.json",
                                        "zero3_offload_optimizer_cpu.json",
                                        "zero3_offload_all_cpu.json",
                                        "zero3_offload_nvme.json",
                                        "zero3_hf_auto.json"};

inline std::string example_path(const std::string& name) {
  return std::string(ZPLAN_SOURCE_DIR) + "/examples/ds_configs/" + name;
}

inline ParseContext context8() {
  ParseContext c;
  c.dp_world_size = 8;
  c.hidden_size = kHidden;
  return c;
}

inline DsConfig parse(const json& j, const ParseContext& context = context8()) {
  return parse_ds_config(j, "t.json", context);
}

// A minimal valid ds_config (micro-batch 1) with the given zero_optimization block.
inline json with_zero(json zero) {
  return {{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", std::move(zero)}};
}

// The one-line InputError parsing `j` gives; fails the test when it parses.
inline std::string error_of(const json& j, const ParseContext& context = context8()) {
  try {
    parse(j, context);
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("parsed without an error: " << j.dump());
  return "";
}

inline json merged(json a, const json& b) {
  a.update(b);
  return a;
}

inline std::string validate_error(const DsConfig& c, int dp = 8) {
  try {
    validate_ds_config(c, dp, "planner");
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("validated without an error");
  return "";
}

// The first difference between two configs ("" when equal), comparing what DeepSpeed would do:
// the rest of an offload block with device "none", of a disabled activation_checkpointing
// block and the zero_optimization keys the stage does not read are ignored, as nothing reads
// them.
inline std::string difference(const DsConfig& a, const DsConfig& b) {
  std::ostringstream out;
  auto cmp = [&](const char* name, const auto& x, const auto& y) {
    if (out.tellp() == 0 && !(x == y)) out << name << " differs";
  };
  const ZeroConfig& za = a.zero;
  const ZeroConfig& zb = b.zero;
  cmp("stage", za.stage, zb.stage);
  // Only the keys the stage reads (what ds_config_to_json writes).
  if (za.stage >= 1) {
    cmp("contiguous_gradients", za.contiguous_gradients, zb.contiguous_gradients);
    cmp("reduce_bucket_size", za.reduce_bucket_size, zb.reduce_bucket_size);
    cmp("overlap_comm", za.overlap_comm, zb.overlap_comm);
  }
  if (za.stage == 1 || za.stage == 2) {
    cmp("reduce_scatter", za.reduce_scatter, zb.reduce_scatter);
    cmp("use_multi_rank_bucket_allreduce", za.use_multi_rank_bucket_allreduce,
        zb.use_multi_rank_bucket_allreduce);
    cmp("allgather_bucket_size", za.allgather_bucket_size, zb.allgather_bucket_size);
    cmp("round_robin_gradients", za.round_robin_gradients, zb.round_robin_gradients);
  }
  if (za.stage == 3) {
    cmp("sub_group_size", za.sub_group_size, zb.sub_group_size);
    cmp("prefetch_bucket_size", za.prefetch_bucket_size, zb.prefetch_bucket_size);
    cmp("param_persistence_threshold", za.param_persistence_threshold,
        zb.param_persistence_threshold);
    cmp("model_persistence_threshold", za.model_persistence_threshold,
        zb.model_persistence_threshold);
    cmp("max_live_parameters", za.max_live_parameters, zb.max_live_parameters);
    cmp("max_reuse_distance", za.max_reuse_distance, zb.max_reuse_distance);
    cmp("leaf_module", za.leaf_module, zb.leaf_module);
  }
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
inline json check_round_trip(const DsConfig& c, int dp = 8) {
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
inline const std::vector<std::string> kDeepSpeedZeroKeys = {
    "stage",
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

inline void check_only_known_zero_keys(const json& written) {
  for (const auto& [key, value] : written.at("zero_optimization").items()) {
    INFO(key);
    CHECK(std::find(kDeepSpeedZeroKeys.begin(), kDeepSpeedZeroKeys.end(), key) !=
          kDeepSpeedZeroKeys.end());
  }
}

// A config as the planner builds one: DeepSpeed's defaults plus the given stage.
inline DsConfig built(int stage) {
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

}  // namespace zplan::sim::testing

#endif  // ZPLAN_TESTS_SIM_ZERO_CONFIG_TEST_UTIL_H_
