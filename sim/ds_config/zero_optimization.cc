// The zero_optimization block of a ds_config, as DeepSpeed 0.19 reads it: DeepSpeedZeroConfig in
// deepspeed/runtime/zero/config.py with its offload blocks from offload_config.py
// (reference/deepspeed_internals.md §1.1), plus the Hugging Face Trainer's "auto" fill
// (reference §1.6).
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "base/input_error.h"
#include "base/json_reader.h"
#include "sim/ds_config/zero_config.h"
#include "sim/ds_config/zero_config_internal.h"

namespace zplan::sim::internal {

namespace {

using nlohmann::json;

// How zplan reads each key of DeepSpeedZeroConfig. Modeled keys become ZeroConfig fields; the
// others are type-checked and kept in ZeroConfig::other under their JSON name.
enum class Kind {
  kModeled,
  kDeprecated,  // cpu_offload & co., mapped as DeepSpeed's deprecated-field hook does
  kBool,
  kOptionalBool,  // Optional[bool]: null allowed
  kInt,
  kNonNegativeInt,  // Field(ge=0)
  kOptionalObject,  // a nested model zplan passes through (null allowed)
};

struct ZeroKey {
  std::string_view json_name;
  // The pydantic attribute name when it differs from the JSON alias: the model sets
  // populate_by_name, so DeepSpeed accepts both spellings (but not both at once).
  std::string_view field_name;
  Kind kind;
};

// Every field of DeepSpeedZeroConfig at DeepSpeed 0.19.6 (reference §1.1).
constexpr ZeroKey kZeroKeys[] = {
    {"stage", "", Kind::kModeled},
    {"contiguous_gradients", "", Kind::kModeled},
    {"reduce_scatter", "", Kind::kModeled},
    {"reduce_bucket_size", "", Kind::kModeled},
    {"use_multi_rank_bucket_allreduce", "", Kind::kModeled},
    {"allgather_partitions", "", Kind::kBool},  // parsed, never consumed (reference §1.1)
    {"allgather_bucket_size", "", Kind::kModeled},
    {"overlap_comm", "", Kind::kModeled},
    {"load_from_fp32_weights", "", Kind::kBool},
    {"elastic_checkpoint", "", Kind::kBool},
    {"offload_param", "", Kind::kModeled},
    {"offload_optimizer", "", Kind::kModeled},
    {"zenflow", "", Kind::kOptionalObject},
    {"sub_group_size", "", Kind::kModeled},
    {"cpu_offload_param", "", Kind::kDeprecated},
    {"cpu_offload_use_pin_memory", "", Kind::kOptionalBool},  // deprecated, has no effect
    {"cpu_offload", "", Kind::kDeprecated},
    {"stage3_prefetch_bucket_size", "prefetch_bucket_size", Kind::kModeled},
    {"stage3_param_persistence_threshold", "param_persistence_threshold", Kind::kModeled},
    {"stage3_model_persistence_threshold", "model_persistence_threshold", Kind::kModeled},
    {"stage3_max_live_parameters", "max_live_parameters", Kind::kModeled},
    {"stage3_max_reuse_distance", "max_reuse_distance", Kind::kModeled},
    {"stage3_gather_16bit_weights_on_model_save", "gather_16bit_weights_on_model_save",
     Kind::kBool},
    {"stage3_module_granularity_threshold", "module_granularity_threshold", Kind::kInt},
    {"stage3_use_all_reduce_for_fetch_params", "use_all_reduce_for_fetch_params", Kind::kBool},
    {"stage3_allgather_sequential", "allgather_sequential", Kind::kBool},
    {"stage3_gather_fp16_weights_on_model_save", "", Kind::kDeprecated},
    {"ignore_unused_parameters", "", Kind::kBool},
    {"legacy_stage1", "", Kind::kBool},
    {"round_robin_gradients", "", Kind::kModeled},
    {"zero_hpz_partition_size", "", Kind::kModeled},
    {"zero_quantized_weights", "", Kind::kModeled},
    {"zero_quantized_nontrainable_weights", "", Kind::kBool},
    {"zero_quantized_gradients", "", Kind::kModeled},
    {"zeropp_loco_param", "", Kind::kOptionalObject},
    {"mics_shard_size", "", Kind::kModeled},
    {"mics_hierarchical_params_gather", "", Kind::kModeled},
    {"memory_efficient_linear", "", Kind::kBool},
    {"pipeline_loading_checkpoint", "", Kind::kBool},
    {"override_module_apply", "", Kind::kBool},
    {"log_trace_cache_warnings", "", Kind::kBool},
    {"enable_sanity_checks", "", Kind::kBool},
    {"save_muon_momentum_buffer_in_memory", "", Kind::kBool},
    {"leaf_module", "", Kind::kModeled},
};

// Accepted offload_optimizer keys zplan does not model; kept in ZeroConfig::other's
// "offload_optimizer" object.
constexpr std::string_view kOffloadOptimizerPassthrough[] = {"super_offload", "cpuadam_cores_perc"};

const ZeroKey* find_zero_key(std::string_view name) {
  for (const ZeroKey& k : kZeroKeys) {
    if (k.json_name == name || (!k.field_name.empty() && k.field_name == name)) return &k;
  }
  return nullptr;
}

const std::vector<std::string_view>& zero_key_spellings() {
  static const std::vector<std::string_view> spellings = [] {
    std::vector<std::string_view> v;
    for (const ZeroKey& k : kZeroKeys) {
      v.push_back(k.json_name);
      if (!k.field_name.empty()) v.push_back(k.field_name);
    }
    return v;
  }();
  return spellings;
}

// The deprecated `"zero_optimization": true|false` form (read_zero_config_deprecated in
// zero/config.py): true is stage 1 with the top-level "allgather_size".
ZeroConfig read_deprecated_bool_form(const JsonReader& top, bool enabled, Locator& locator) {
  ZeroConfig z;
  if (!enabled) return z;
  z.stage = 1;
  if (std::optional<int64_t> v = top.optional_integer("allgather_size")) {
    z.allgather_bucket_size = *v;
    locator.redirect(kZ + "allgather_bucket_size", "/allgather_size");
  }
  return z;
}

// zero_optimization as one reader: the block, its typed reads, and the spelling the file uses for
// each field (pydantic's populate_by_name: "stage3_max_live_parameters" or
// "max_live_parameters").
struct ZeroReader {
  const JsonReader& r;
  BlockReader b;
  std::map<std::string_view, std::string> spelled;

  // The key the file uses for `json_name` (the JSON name itself when absent).
  std::string key(std::string_view json_name) const {
    auto f = spelled.find(json_name);
    return f == spelled.end() ? std::string(json_name) : f->second;
  }
};

// Which spelling of each field the file uses; a dropped "auto" does not count. Giving both is a
// problem.
std::map<std::string_view, std::string> spellings(const JsonReader& r, Locator& locator,
                                                  Errors& errors) {
  std::map<std::string_view, std::string> spelled;
  for (const auto& [key, value] : r.json().items()) {
    if (value.is_string() && value.get_ref<const std::string&>() == "auto") continue;
    const ZeroKey* k = find_zero_key(key);
    if (k == nullptr) continue;  // an unknown key, reported already
    auto [pos, inserted] = spelled.emplace(k->json_name, key);
    if (!inserted) {
      errors.step([&] {
        r.fail(key, "is given twice, also as " + json_quoted(pos->second) +
                        " (DeepSpeed accepts either spelling, not both)");
      });
    }
    if (key != k->json_name) {
      locator.redirect(kZ + std::string(k->json_name), kZ + json_pointer_escape(key));
    }
  }
  return spelled;
}

// "stage": "auto" is what the Hugging Face Trainer fills: it always builds Accelerate's
// DeepSpeedPlugin (transformers training_args.py), whose __post_init__ sets zero_stage from
// ACCELERATE_DEEPSPEED_ZERO_STAGE, default 2, and fill_match writes it over "auto"
// (accelerate/utils/dataclasses.py). DeepSpeed alone drops "auto" (pydantic) and runs stage 0.
constexpr int kAcceleratesAutoStage = 2;

void read_stage(const ZeroReader& zr, const ParseContext& context, const Locator& locator,
                ZeroConfig& z) {
  if (context.stage) {
    if (std::optional<std::string> problem = stage_range_problem(*context.stage)) {
      throw InputError("--stage", *problem);
    }
  }
  if (zr.r.is_auto("stage")) {
    z.stage = context.stage.value_or(kAcceleratesAutoStage);
    if (!context.stage && context.notes != nullptr) {
      context.notes->push_back(
          locator.at(kZ + "stage") +
          " is \"auto\": planned as ZeRO stage " + std::to_string(kAcceleratesAutoStage) +
          ", which the Hugging Face Trainer fills in (Accelerate's zero_stage, "
          "ACCELERATE_DEEPSPEED_ZERO_STAGE, default " + std::to_string(kAcceleratesAutoStage) +
          "); DeepSpeed launched without the Trainer would run stage 0; --stage N plans another");
    }
    return;
  }
  if (std::optional<int64_t> v = zr.b.integer(zr.key("stage"))) {
    if (std::optional<std::string> problem = stage_range_problem(*v)) {
      zr.r.fail(zr.key("stage"), *problem);
    }
    z.stage = static_cast<int>(*v);
  }
  // As with the batch flags: a --stage that repeats the file is the same job; another is not.
  if (context.stage && *context.stage != z.stage) {
    zr.r.fail(zr.key("stage"), "is " + std::to_string(z.stage) + " in the file, but --stage says " +
                                   std::to_string(*context.stage) +
                                   "; --stage fills only \"stage\": \"auto\" (edit the file "
                                   "to plan another)");
  }
}

// The modeled booleans and sizes, each read on its own. Sizes are Field(ge=0): 0 is valid
// (zero/config.py); what 0 does is in check_zero_optimization.
void read_flags_and_sizes(const ZeroReader& zr, ZeroConfig& z, Errors& errors) {
  auto flag = [&](std::string_view json_name, bool& out) {
    errors.step([&] {
      if (std::optional<bool> v = zr.b.boolean(zr.key(json_name))) out = *v;
    });
  };
  flag("contiguous_gradients", z.contiguous_gradients);
  flag("reduce_scatter", z.reduce_scatter);
  flag("use_multi_rank_bucket_allreduce", z.use_multi_rank_bucket_allreduce);
  flag("round_robin_gradients", z.round_robin_gradients);
  flag("zero_quantized_weights", z.quantized_weights);
  flag("zero_quantized_gradients", z.quantized_gradients);
  flag("mics_hierarchical_params_gather", z.mics_hierarchical_params_gather);
  // mics_shard_size is a plain int (any value; <= 0 is off), the hpZ size Field(ge=0).
  errors.step([&] {
    if (std::optional<int64_t> v = zr.b.integer(zr.key("mics_shard_size"))) z.mics_shard_size = *v;
  });
  const std::pair<std::string_view, int64_t*> sizes[] = {
      {"reduce_bucket_size", &z.reduce_bucket_size},
      {"allgather_bucket_size", &z.allgather_bucket_size},
      {"sub_group_size", &z.sub_group_size},
      {"stage3_prefetch_bucket_size", &z.prefetch_bucket_size},
      {"stage3_param_persistence_threshold", &z.param_persistence_threshold},
      {"stage3_model_persistence_threshold", &z.model_persistence_threshold},
      {"stage3_max_live_parameters", &z.max_live_parameters},
      {"stage3_max_reuse_distance", &z.max_reuse_distance},
      {"zero_hpz_partition_size", &z.hpz_partition_size}};
  for (const auto& [json_name, out] : sizes) {
    errors.step([&] { read_count(zr.b, zr.key(json_name), *out); });
  }
  // overlap_comm_valid (zero/config.py): unset means "on for stage 3 only".
  z.overlap_comm = z.stage == 3;
  errors.step([&] {
    z.overlap_comm =
        zr.b.boolean(zr.key("overlap_comm"), Null::kMeansDefault).value_or(z.stage == 3);
  });
}

// The Hugging Face Trainer fills these "auto"s from the model (trainer_config_finalize in
// transformers/integrations/deepspeed.py, reference §1.6); the two stage-3 keys only when the
// stage is 3, else DeepSpeed drops the "auto" and uses its default. It looks only at the JSON
// spellings, not at pydantic's attribute names.
void fill_trainer_autos(const ZeroReader& zr, const ParseContext& context, ZeroConfig& z) {
  const int64_t h = context.hidden_size;
  auto hidden_squared = [&](std::string_view json_name) -> int64_t {
    int64_t h2 = 0;
    if (h <= 0) {
      zr.r.fail(json_name,
                "\"auto\" is filled from the model's hidden size (as the Hugging Face "
                "Trainer does), and no model is known here");
    }
    if (__builtin_mul_overflow(h, h, &h2)) zr.r.fail(json_name, "hidden size is too large");
    return h2;
  };
  const ZeroConfig defaults;
  std::vector<std::string> filled;  // "key N (DeepSpeed's own D)", one per "auto" filled
  auto fill = [&](const char* key, int64_t value, int64_t deepspeed_default, int64_t& out) {
    out = value;
    filled.push_back(std::string(key) + " " + std::to_string(value) + " (DeepSpeed's own " +
                     std::to_string(deepspeed_default) + ")");
  };
  if (zr.r.is_auto("reduce_bucket_size")) {
    fill("reduce_bucket_size", hidden_squared("reduce_bucket_size"), defaults.reduce_bucket_size,
         z.reduce_bucket_size);
  }
  if (z.stage == 3 && zr.r.is_auto("stage3_prefetch_bucket_size")) {
    double h2 = static_cast<double>(hidden_squared("stage3_prefetch_bucket_size"));
    // Python's int(0.9 * h * h)
    fill("stage3_prefetch_bucket_size", static_cast<int64_t>(0.9 * h2),
         defaults.prefetch_bucket_size, z.prefetch_bucket_size);
  }
  if (z.stage == 3 && zr.r.is_auto("stage3_param_persistence_threshold")) {
    hidden_squared("stage3_param_persistence_threshold");
    fill("stage3_param_persistence_threshold", 10 * h, defaults.param_persistence_threshold,
         z.param_persistence_threshold);
  }
  // Accelerate's prepare fills the same three from model.config.hidden_size
  // (accelerator.py _prepare_deepspeed); deepspeed.initialize alone drops each "auto"
  // (config_utils.py DeepSpeedConfigModel) and keeps its default, so the planned run is the
  // Trainer's or Accelerate's, and a plain DeepSpeed script sends other bucket sizes.
  if (!filled.empty() && context.notes != nullptr) {
    std::string line = zr.r.location() + ": \"auto\" filled as the Hugging Face Trainer and " +
                       "Accelerate fill it from hidden size " + std::to_string(h) + ": ";
    for (size_t i = 0; i < filled.size(); ++i) line += (i ? ", " : "") + filled[i];
    line += "; a script that calls deepspeed.initialize itself runs DeepSpeed's own values";
    context.notes->push_back(line);
  }
}

// The accepted keys zplan does not model: type-checked and kept in ZeroConfig::other.
void read_passthrough_keys(const ZeroReader& zr, ZeroConfig& z, Errors& errors) {
  const BlockReader& b = zr.b;
  for (const ZeroKey& k : kZeroKeys) {
    const std::string actual = zr.key(k.json_name);
    const std::string name(k.json_name);
    errors.step([&] {
      switch (k.kind) {
        case Kind::kModeled:
        case Kind::kDeprecated:
          break;
        case Kind::kBool:
          if (auto v = b.boolean(actual)) z.other[name] = *v;
          break;
        case Kind::kOptionalBool:
          if (auto v = b.boolean(actual, Null::kMeansDefault)) z.other[name] = *v;
          break;
        case Kind::kInt:
          if (auto v = b.integer(actual)) z.other[name] = *v;
          break;
        case Kind::kNonNegativeInt: {
          int64_t v = -1;
          read_count(b, actual, v);
          if (v >= 0) z.other[name] = v;
          break;
        }
        case Kind::kOptionalObject:
          if (const json* v = b.object(actual, Null::kMeansDefault)) z.other[name] = *v;
          break;
      }
    });
  }
  if (json_true(z.other, "legacy_stage1")) {
    errors.step([&] {
      zr.r.fail(zr.key("legacy_stage1"),
                "the legacy ZeRO stage 1 was removed in DeepSpeed 0.5.9, which "
                "raises when this is true");
    });
  }
}

// Deprecated fields (DeepSpeedConfigModel._process_deprecated_field): the old key sets the new
// one, and giving both is an error even when the old one is null or false.
void read_deprecated_keys(const ZeroReader& zr, Locator& locator, ZeroConfig& z) {
  const BlockReader& b = zr.b;
  if (auto v = b.boolean("stage3_gather_fp16_weights_on_model_save")) {
    if (b.given(zr.key("stage3_gather_16bit_weights_on_model_save"))) {
      zr.r.fail("stage3_gather_fp16_weights_on_model_save",
                "is the deprecated name of stage3_gather_16bit_weights_on_model_save; give one, "
                "not both");
    }
    z.other["stage3_gather_16bit_weights_on_model_save"] = *v;
  }
  auto deprecated_offload = [&](const char* old_key, std::string_view new_key) {
    if (!b.given(old_key)) return false;
    if (b.given(zr.key(new_key))) {
      zr.r.fail(old_key, "is the deprecated form of " + std::string(new_key) +
                             "; give one of them, not both");
    }
    if (!b.boolean(old_key, Null::kMeansDefault).value_or(false)) return false;
    locator.redirect(kZ + std::string(new_key), kZ + old_key);
    return true;
  };
  if (deprecated_offload("cpu_offload_param", "offload_param")) {
    z.offload_param.device = OffloadDevice::kCpu;
  }
  if (deprecated_offload("cpu_offload", "offload_optimizer")) {
    z.offload_optimizer.device = OffloadDevice::kCpu;
  }
}

void read_leaf_module_block(const ZeroReader& zr, ZeroConfig& z, Errors& errors) {
  errors.step([&] {
    if (zr.b.object(zr.key("leaf_module"), Null::kMeansDefault)) {
      z.leaf_module = read_leaf_module(zr.r.child(zr.key("leaf_module")), errors);
    }
  });
}

// An offload block's "device": "auto" is dropped by DeepSpeed's pydantic model (so "none"), and
// filled by Accelerate from its config's offload_optimizer_device / offload_param_device (default
// none); the Hugging Face Trainer alone leaves it. Say so, as the other "auto" fills are said.
void note_auto_device(const ZeroReader& zr, std::string_view block, const ParseContext& context,
                      const Locator& locator) {
  if (context.notes == nullptr) return;
  const JsonReader b = zr.r.child(zr.key(block));
  if (!b.is_auto("device")) return;
  context.notes->push_back(
      locator.at(kZ + std::string(block) + "/device") +
      " is \"auto\": planned as \"none\", as DeepSpeed drops it and Accelerate fills it from "
      "its config's " + std::string(block) + "_device (default none); give \"cpu\" or \"nvme\" "
      "(or --offload-* without the file) to plan an offload");
}

void read_offload_blocks(const ZeroReader& zr, const ParseContext& context,
                         const Locator& locator, ZeroConfig& z, Errors& errors) {
  errors.step([&] {
    if (zr.b.object(zr.key("offload_param"), Null::kMeansDefault)) {
      z.offload_param = read_offload_param(zr.r.child(zr.key("offload_param")), errors);
      note_auto_device(zr, "offload_param", context, locator);
    }
  });
  errors.step([&] {
    if (zr.b.object(zr.key("offload_optimizer"), Null::kMeansDefault)) {
      json extras;
      z.offload_optimizer =
          read_offload_optimizer(zr.r.child(zr.key("offload_optimizer")), z.stage, extras, errors);
      if (!extras.is_null()) z.other["offload_optimizer"] = std::move(extras);
      note_auto_device(zr, "offload_optimizer", context, locator);
    }
  });
}

// Resolved the way the engine and the optimizers do: stage 1/2 turn contiguous gradients on
// with optimizer offload (stage_1_and_2.py); stage 3 with allgather_sequential gathers one
// parameter at a time, so the engine sets the prefetch bucket to 1 (engine.py; MiCS aside),
// which a note says.
void resolve_as_the_engine_does(const ZeroReader& zr, const ParseContext& context,
                                ZeroConfig& z) {
  if ((z.stage == 1 || z.stage == 2) && z.offload_optimizer.device != OffloadDevice::kNone) {
    z.contiguous_gradients = true;
  }
  if (allgathers_sequentially(z)) {
    z.prefetch_bucket_size = 1;
    if (context.notes != nullptr) {
      context.notes->push_back(
          zr.r.location(zr.key("stage3_allgather_sequential")) +
          " is true: planned as DeepSpeed's engine runs it, with stage3_prefetch_bucket_size 1 "
          "(no parameter gathered ahead of its module)");
    }
  }
}

}  // namespace

bool uses_nvme(const ZeroConfig& zero) {
  return zero.offload_param.device == OffloadDevice::kNvme ||
         zero.offload_optimizer.device == OffloadDevice::kNvme;
}

ZeroConfig read_zero_optimization(const JsonReader& top, const ParseContext& context,
                                  Locator& locator, Errors& errors) {
  const json& doc = top.json();
  auto it = doc.find("zero_optimization");
  if (it == doc.end()) {
    if (context.stage) {
      errors.step([&] {
        top.fail("has no zero_optimization block (ZeRO stage 0); --stage fills only "
                 "\"stage\": \"auto\"");
      });
    }
    return ZeroConfig{};
  }
  ZeroConfig z;
  if (it->is_boolean()) {
    errors.step([&] { z = read_deprecated_bool_form(top, it->get<bool>(), locator); });
    return z;
  }
  std::optional<JsonReader> r;
  errors.step([&] { r = top.child("zero_optimization"); });  // throws unless an object
  if (!r) return z;
  reject_unknown_keys(*r, zero_key_spellings(), AutoRule::kMeansDefault,
                      "DeepSpeed 0.19's DeepSpeedZeroConfig (zero_optimization)", errors);
  ZeroReader zr{*r, BlockReader(*r, AutoRule::kMeansDefault), spellings(*r, locator, errors)};
  errors.step([&] { read_stage(zr, context, locator, z); });
  read_flags_and_sizes(zr, z, errors);
  errors.step([&] { fill_trainer_autos(zr, context, z); });
  read_passthrough_keys(zr, z, errors);
  errors.step([&] { read_deprecated_keys(zr, locator, z); });
  read_offload_blocks(zr, context, locator, z, errors);
  read_leaf_module_block(zr, z, errors);
  resolve_as_the_engine_does(zr, context, z);
  return z;
}

void check_zero_other(const ZeroConfig& z, const Locator& loc) {
  if (!z.other.is_object()) {
    loc.fail("/zero_optimization",
             "ZeroConfig::other must be a JSON object, got " + describe_json_value(z.other));
  }
  for (const auto& [key, value] : z.other.items()) {
    const std::string at = kZ + json_pointer_escape(key);
    if (key == "offload_optimizer") {
      if (!value.is_object()) loc.fail(at, "must be an object, got " + describe_json_value(value));
      for (const auto& [sub, unused] : value.items()) {
        if (std::find(std::begin(kOffloadOptimizerPassthrough),
                      std::end(kOffloadOptimizerPassthrough),
                      sub) == std::end(kOffloadOptimizerPassthrough)) {
          loc.fail(at + "/" + json_pointer_escape(sub),
                   "is not an offload_optimizer key zplan passes through (OffloadOptimizerConfig "
                   "models the others)");
        }
      }
      continue;
    }
    const ZeroKey* k = find_zero_key(key);
    if (k == nullptr) loc.fail(at, "is not a key DeepSpeed 0.19's zero_optimization accepts");
    if (k->kind == Kind::kModeled || k->kind == Kind::kDeprecated || key != k->json_name) {
      loc.fail(at,
               "belongs in ZeroConfig's own fields, not in ZeroConfig::other (which holds "
               "keys under their JSON names that zplan does not model)");
    }
  }
  // Their values get a file's type checks, read where a file has them.
  const JsonReader r(z.other, loc.file(), "/zero_optimization");
  ZeroReader zr{r, BlockReader(r, AutoRule::kMeansDefault), {}};
  ZeroConfig scratch;
  Errors errors;
  read_passthrough_keys(zr, scratch, errors);
  errors.throw_if_any();
}

json zero_optimization_to_json(const ZeroConfig& z) {
  json j = json::object();
  if (z.other.is_object()) {
    for (const auto& [key, value] : z.other.items()) {
      if (key != "offload_optimizer") j[key] = value;
    }
  }
  j["stage"] = z.stage;
  // Only the keys the stage's code reads, so that none looks as if it mattered: without ZeRO the
  // engine reads none of them (it all-reduces in MEMORY_OPT_ALLREDUCE_SIZE pieces); the bucket,
  // overlap and reduce_scatter keys are read by stage_1_and_2.py and stage3.py (stage 3's
  // __reduce_and_partition_ipg_grads all-reduces a contiguous bucket when reduce_scatter is
  // false); use_multi_rank_bucket_allreduce, allgather_bucket_size and round_robin_gradients by
  // stage_1_and_2.py only; sub_group_size and the stage3_* keys by stage3.py and
  // parameter_offload.py only.
  if (z.stage >= 1) {
    j["contiguous_gradients"] = z.contiguous_gradients;
    j["reduce_bucket_size"] = z.reduce_bucket_size;
    j["overlap_comm"] = z.overlap_comm;
    j["reduce_scatter"] = z.reduce_scatter;
  }
  if (z.stage == 1 || z.stage == 2) {
    j["use_multi_rank_bucket_allreduce"] = z.use_multi_rank_bucket_allreduce;
    j["allgather_bucket_size"] = z.allgather_bucket_size;
    j["round_robin_gradients"] = z.round_robin_gradients;
  }
  if (z.stage == 3) {
    j["sub_group_size"] = z.sub_group_size;
    j["stage3_prefetch_bucket_size"] = z.prefetch_bucket_size;
    j["stage3_param_persistence_threshold"] = z.param_persistence_threshold;
    // Its default is sys.maxsize; written only when set, to keep the file readable.
    if (z.model_persistence_threshold != std::numeric_limits<int64_t>::max()) {
      j["stage3_model_persistence_threshold"] = z.model_persistence_threshold;
    }
    j["stage3_max_live_parameters"] = z.max_live_parameters;
    j["stage3_max_reuse_distance"] = z.max_reuse_distance;
    // ZeRO++ and MiCS keys only when on, so that a plain ZeRO-3 file stays as it was.
    if (z.hpz()) j["zero_hpz_partition_size"] = z.hpz_partition_size;
    if (z.quantized_weights) j["zero_quantized_weights"] = true;
    if (z.quantized_gradients) j["zero_quantized_gradients"] = true;
    if (z.mics()) {
      j["mics_shard_size"] = z.mics_shard_size;
      if (z.mics_hierarchical_params_gather) j["mics_hierarchical_params_gather"] = true;
    }
    // Only when it differs from DeepSpeed's default (and DeepSpeed before 0.18 has no such key).
    if (!z.leaf_module.is_default()) j["leaf_module"] = leaf_module_to_json(z.leaf_module);
  }
  if (z.offload_param.device != OffloadDevice::kNone) {
    j["offload_param"] = offload_param_to_json(z.offload_param);
  }
  if (z.offload_optimizer.device != OffloadDevice::kNone) {
    json extras =
        z.other.is_object() ? z.other.value("offload_optimizer", json::object()) : json::object();
    j["offload_optimizer"] = offload_optimizer_to_json(z.offload_optimizer, extras);
  }
  return j;
}

}  // namespace zplan::sim::internal
