// The checks of a resolved zero_optimization block (ZeroConfig), as DeepSpeed 0.19 validates it
// (deepspeed/runtime/zero/config.py's Field constraints and validators, the engine's and the
// ZeRO optimizers' set-up asserts), and the features zplan refuses rather than predict wrongly;
// zero_optimization.cc reads the block. Sources: reference/deepspeed_internals.md §1.1.
#include <algorithm>
#include <optional>
#include <string>

#include "base/input_error.h"
#include "base/json_reader.h"
#include "sim/ds_config/zero_config.h"
#include "sim/ds_config/zero_config_internal.h"

namespace zplan::sim {

std::optional<std::string> stage_range_problem(int64_t stage) {
  if (stage >= 0 && stage <= 3) return std::nullopt;
  return "must be a ZeRO stage 0, 1, 2 or 3, got " + std::to_string(stage);
}

}  // namespace zplan::sim

namespace zplan::sim::internal {

using nlohmann::json;

bool json_true(const json& object, const char* key) {
  if (!object.is_object()) return false;
  auto it = object.find(key);
  return it != object.end() && it->is_boolean() && it->get<bool>();
}

bool allgathers_sequentially(const ZeroConfig& z) {
  return z.stage == 3 && json_true(z.other, "stage3_allgather_sequential") && !z.mics();
}

void check_stage(int stage, const Locator& loc) {
  if (std::optional<std::string> problem = stage_range_problem(stage)) {
    loc.fail(kZ + "stage", *problem);
  }
}

void check_zero_optimization(const ZeroConfig& z, const Locator& loc) {
  check_stage(z.stage, loc);
  // DeepSpeed declares every size Field(ge=0) (zero/config.py), and 0 runs where it means
  // something: reduce_bucket_size 0 reduces each gradient on its own, as a tensor larger than
  // the bucket is (stage_1_and_2.py reduce_independent_p_g_buckets_and_remove_grads, stage3.py
  // __add_grad_to_ipg_bucket: no IPG buffer is filled); sub_group_size 0 makes one sub-group per
  // parameter (stage3.py _create_fp16_sub_groups closes a sub-group once it holds >= 0
  // elements); a prefetch bucket of 0 is "no prefetch". allgather_bucket_size 0 divides by zero
  // in the stage 1/2 all-gather (runtime/utils.py all_gather_dp_groups), so zplan refuses it.
  auto non_negative = [&](const std::string& pointer, int64_t v) {
    if (v < 0) loc.fail(pointer, "must not be negative, got " + std::to_string(v));
  };
  non_negative(kZ + "reduce_bucket_size", z.reduce_bucket_size);
  if (z.allgather_bucket_size <= 0) {
    loc.fail(kZ + "allgather_bucket_size", "must be a positive number of elements, got " +
                                               std::to_string(z.allgather_bucket_size));
  }
  non_negative(kZ + "sub_group_size", z.sub_group_size);
  non_negative(kZ + "stage3_prefetch_bucket_size", z.prefetch_bucket_size);
  non_negative(kZ + "stage3_param_persistence_threshold", z.param_persistence_threshold);
  non_negative(kZ + "stage3_model_persistence_threshold", z.model_persistence_threshold);
  non_negative(kZ + "stage3_max_live_parameters", z.max_live_parameters);
  non_negative(kZ + "stage3_max_reuse_distance", z.max_reuse_distance);

  const std::string stage = std::to_string(z.stage);
  const OffloadParamConfig& p = z.offload_param;
  if (p.device != OffloadDevice::kNone) {
    const std::string at = kZ + "offload_param/";
    if (z.stage != 3) {
      loc.fail(at + "device",
               "parameter offload is valid only with ZeRO stage 3, but stage is " + stage);
    }
    if (p.device == OffloadDevice::kNvme && p.nvme_path.empty()) {
      loc.fail(at + "nvme_path", "is needed with device \"nvme\" (DeepSpeed asserts it)");
    }
    if (p.buffer_count < 1) {
      loc.fail(at + "buffer_count", "must be at least 1, got " + std::to_string(p.buffer_count));
    }
    if (p.buffer_size < 1) {
      loc.fail(at + "buffer_size", "must be at least 1, got " + std::to_string(p.buffer_size));
    }
    non_negative(at + "max_in_cpu", p.max_in_cpu);
  }
  const OffloadOptimizerConfig& o = z.offload_optimizer;
  const std::string at = kZ + "offload_optimizer/";
  if (o.device != OffloadDevice::kNone) {
    if (z.stage == 0) {
      loc.fail(at + "device", "optimizer offload needs ZeRO stage 1, 2 or 3, but stage is 0");
    }
    if (o.device == OffloadDevice::kNvme && z.stage != 3) {
      loc.fail(at + "device",
               "NVMe optimizer offload needs ZeRO stage 3 (stages 1 and 2 would "
               "quietly offload to CPU memory instead), but stage is " +
                   stage);
    }
    if (o.device == OffloadDevice::kNvme && o.nvme_path.empty()) {
      loc.fail(at + "nvme_path",
               "is needed with device \"nvme\" (DeepSpeed joins it into the "
               "swap folder's path)");
    }
    if (o.buffer_count < 1) {
      loc.fail(at + "buffer_count", "must be at least 1, got " + std::to_string(o.buffer_count));
    }
  }
  if (!(o.ratio >= 0 && o.ratio <= 1)) {
    loc.fail(at + "ratio", "must be between 0 and 1, got " + json(o.ratio).dump());
  }
  if (o.ratio < 1 && z.stage != 3) {
    loc.fail(at + "ratio",
             "partial offload (ratio < 1) is only supported with ZeRO stage 3, but "
             "stage is " +
                 stage);
  }
  if ((z.stage == 1 || z.stage == 2) && o.device != OffloadDevice::kNone &&
      !z.contiguous_gradients) {
    loc.fail(kZ + "contiguous_gradients",
             "stage 1/2 with optimizer offload always uses contiguous gradients (DeepSpeed turns "
             "it on), so it cannot be false here");
  }
  if (allgathers_sequentially(z) && z.prefetch_bucket_size != 1) {
    loc.fail(kZ + "stage3_prefetch_bucket_size",
             "must be 1 with stage3_allgather_sequential (DeepSpeed's engine sets it so), got " +
                 std::to_string(z.prefetch_bucket_size));
  }
  if (json_true(z.other, "legacy_stage1")) {
    loc.fail(kZ + "legacy_stage1", "the legacy ZeRO stage 1 was removed in DeepSpeed 0.5.9");
  }
}

void reject_unmodeled_zero_features(const ZeroConfig& z, const Locator& loc) {
  // Optimizer schedules of their own: ZenFlow (stage_1_and_2.py: on whenever the zenflow block
  // is given) and SuperOffload (engine.py _configure_zero_optimizer: stage 3 with
  // offload_optimizer.super_offload picks SuperOffloadOptimizer_Stage3).
  if ((z.stage == 1 || z.stage == 2) && z.other.is_object() && z.other.contains("zenflow")) {
    loc.fail(kZ + "zenflow",
             "not modelled: ZenFlow (important gradients updated on the GPU, the rest "
             "asynchronously on the CPU); remove it to plan plain ZeRO optimizer offload");
  }
  const json* extras = z.other.is_object() && z.other.contains("offload_optimizer")
                           ? &z.other["offload_optimizer"]
                           : nullptr;
  if (z.stage == 3 && z.offload_optimizer.device != OffloadDevice::kNone && extras != nullptr &&
      json_true(*extras, "super_offload")) {
    loc.fail(kZ + "offload_optimizer/super_offload",
             "not modelled: SuperOffload (its own stage-3 optimizer and CPU schedule); remove it "
             "to plan plain ZeRO-3 optimizer offload");
  }
  // Two stage-3 fetch schemes other than the all-gather of each module's partitions that zplan
  // prices: use_all_reduce_for_fetch_params has every rank all-reduce a full-size buffer holding
  // its own partition (partition_parameters.py), twice an all-gather's bytes on the ring; a
  // module_granularity_threshold above 0 makes every module whose parameters per descendant fall
  // below it a leaf, fetched whole (parameter_offload.py _set_z3_leaf_modules_by_threshold),
  // which leaf_module does by class.
  if (z.stage == 3 && json_true(z.other, "stage3_use_all_reduce_for_fetch_params")) {
    loc.fail(kZ + "stage3_use_all_reduce_for_fetch_params",
             "not modelled: parameters fetched by all-reduce instead of all-gather; remove it "
             "to plan ZeRO-3's all-gather fetch");
  }
  if (z.stage == 3 && z.other.is_object()) {
    auto it = z.other.find("stage3_module_granularity_threshold");
    if (it != z.other.end() && it->is_number() && it->get<double>() > 0) {
      loc.fail(kZ + "stage3_module_granularity_threshold",
               "not modelled: leaf modules picked by parameters per descendant; set it to 0 and "
               "name the blocks to gather whole in zero_optimization.leaf_module.classes");
    }
  }
  // DeepSpeed reads this in stage 3 only (partition_parameters.py Init): the frozen weights
  // (LoRA's base model, --lora-rank or --trainable) are stored and gathered in int8, which zplan
  // does not model; with every parameter trainable it changes nothing.
  if (z.stage == 3 && json_true(z.other, "zero_quantized_nontrainable_weights")) {
    loc.fail(kZ + "zero_quantized_nontrainable_weights",
             "not modelled: frozen weights stored and gathered in int8; remove it to plan them "
             "in 16 bits (an upper bound on their memory and traffic)");
  }
}

void check_zeropp_mics(const ZeroConfig& z, int dp, const Locator& loc) {
  // DeepSpeed reads these in stage 3 only (reference §1 table, "ZeRO++ hpZ", "MiCS"): at stages
  // 0-2 they change nothing, as in zplan.
  if (z.stage != 3) return;
  const std::string world = std::to_string(dp);
  if (z.hpz()) {
    // groups.py _create_zero_param_parallel_group: min(hpz, world) ranks per group, and
    // _ensure_divisibility(world, that).
    const int64_t group = std::min<int64_t>(z.hpz_partition_size, dp);
    if (dp % group != 0) {
      loc.fail(kZ + "zero_hpz_partition_size",
               std::to_string(z.hpz_partition_size) + " does not divide the " + world +
                   " data-parallel ranks (DeepSpeed's groups._ensure_divisibility asserts it)");
    }
    if (z.offload_param.device != OffloadDevice::kNone) {
      loc.fail(kZ + "zero_hpz_partition_size",
               "not modelled with offload_param: the secondary partition then lives in host "
               "memory (partition_parameters.py _partition_param_sec, remote_device); remove one "
               "of them");
    }
  }
  if (z.quantized_gradients && !z.reduce_scatter) {
    // stage3.py __init__ asserts reduce_scatter whenever the all-to-all group exists.
    loc.fail(kZ + "reduce_scatter",
             "must stay true with zero_quantized_gradients (DeepSpeed's stage 3 asserts it)");
  }
  if (z.quantized_gradients && z.other.is_object() && z.other.contains("zeropp_loco_param") &&
      !z.other["zeropp_loco_param"].is_null()) {
    loc.fail(kZ + "zeropp_loco_param",
             "not modelled: LoCo-ZeRO++ (error-feedback buffers of the quantized gradients, "
             "coalesced_collectives.py all_to_all_loco_quant_reduce); remove it to plan qgZ");
  }
  if (!z.mics()) return;
  const std::string shard = std::to_string(z.mics_shard_size);
  // mics_utils.py _generate_mics_config: the world splits into shards of mics_shard_size.
  if (z.mics_shard_size > dp || dp % z.mics_shard_size != 0) {
    loc.fail(kZ + "mics_shard_size",
             shard + " does not divide the " + world +
                 " data-parallel ranks (DeepSpeed's _generate_mics_config asserts it)");
  }
  // engine.py _return_mics_optimizer builds MiCS_Optimizer without ZeRO++'s arguments (no
  // secondary group, no all-to-all group) and mics.py gathers with its own unquantized
  // all_gather_coalesced: with MiCS these keys would be half applied at best.
  for (const auto& [key, on] :
       {std::pair<const char*, bool>{"zero_hpz_partition_size", z.hpz()},
        {"zero_quantized_weights", z.quantized_weights},
        {"zero_quantized_gradients", z.quantized_gradients}}) {
    if (on) {
      loc.fail(kZ + key,
               "cannot be combined with mics_shard_size: DeepSpeed's MiCS optimizer "
               "(engine.py _return_mics_optimizer, zero/mics.py) does not pass ZeRO++'s settings "
               "on; use one or the other");
    }
  }
  if (z.offload_optimizer.device != OffloadDevice::kNone && z.mics_shard_size < dp) {
    // mics.py allreduce_mics_shard_grads raises for gradient partitions off the accelerator.
    loc.fail(kZ + "offload_optimizer/device",
             "MiCS with replicas (mics_shard_size " + shard + " < " + world +
                 " ranks) does not support optimizer offload: DeepSpeed raises \"Local sharding "
                 "has no support for CPU offloading\" (mics.py allreduce_mics_shard_grads)");
  }
  if (z.offload_param.device != OffloadDevice::kNone) {
    loc.fail(kZ + "mics_shard_size",
             "not modelled with offload_param (MiCS_Offload); remove one of them");
  }
}

}  // namespace zplan::sim::internal
