// Reading, checking and writing a ds_config.json the way DeepSpeed 0.19 reads it. This file has
// the top level (deepspeed/runtime/config.py: gradient_clipping and the keys DeepSpeed ignores)
// and the entry points, which run the read steps; shared_blocks.cc has fp16/bf16, data_types,
// activation_checkpointing and aio, zero_config_batch.cc the batch keys, zero_optimization.cc the
// zero_optimization block,
// top_level_keys.cc the keys kept whole in DsConfig::other, block_reader.cc the shared readers.
// Sources: reference/deepspeed_internals.md §1.
#include "sim/ds_config/zero_config.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/input_error.h"
#include "base/json_reader.h"
#include "sim/ds_config/zero_config_internal.h"

namespace zplan::sim {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kFp16:
      return "fp16";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp32:
      return "fp32";
  }
  return "fp32";
}

const char* attention_name(Attention a) {
  switch (a) {
    case Attention::kEager:
      return "eager";
    case Attention::kSdpa:
      return "sdpa";
    case Attention::kFlash2:
      return "flash_attention_2";
    case Attention::kFlash3:
      return "flash_attention_3";
  }
  return "sdpa";
}

std::optional<Attention> attention_from_name(const std::string& name) {
  std::string n;
  for (char c : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n == "eager") return Attention::kEager;
  if (n == "sdpa") return Attention::kSdpa;
  if (n == "flash2" || n == "flash_attention_2") return Attention::kFlash2;
  if (n == "flash3" || n == "flash_attention_3") return Attention::kFlash3;
  return std::nullopt;
}

const char* offload_device_name(OffloadDevice d) {
  switch (d) {
    case OffloadDevice::kNone:
      return "none";
    case OffloadDevice::kCpu:
      return "cpu";
    case OffloadDevice::kNvme:
      return "nvme";
  }
  return "none";
}

int precision_bytes(Precision p) { return p == Precision::kFp32 ? 4 : 2; }

std::vector<std::string> default_leaf_module_classes() {
  // DEFAULT_LEAF_MODULE_CLASSES (deepspeed/runtime/zero/leaf_module_config.py, 0.19).
  return {"transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock",
          "transformers.models.qwen2_moe.modeling_qwen2_moe.Qwen2MoeSparseMoeBlock",
          "transformers.models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeSparseMoeBlock"};
}

bool uses_bf16_optimizer(const DsConfig& c) {
  return c.zero.stage == 1 && c.precision == Precision::kBf16 &&
         c.grad_accum_dtype == Precision::kFp32 &&
         c.zero.offload_optimizer.device == OffloadDevice::kNone;
}

bool master_grads_alias_grads(const DsConfig& c) {
  return c.zero.stage > 0 && !uses_bf16_optimizer(c) &&
         c.grad_accum_dtype == c.optimizer.master_dtype;
}

double OptimizerConfig::gpu_step_bytes() const {
  if (gpu_step == GpuStep::kFused) return step_bytes();
  // torch/optim/adam.py _multi_tensor_adam, each _foreach_* op a read of its operands and a write
  // of its result, with m the master's (and gradient's) element size and s the states': the
  // weight-decay mul_ of the parameters (2m); lerp_ of exp_avg toward the gradient (2s + m); mul_
  // of exp_avg_sq (2s); addcmul_ of the gradient squared into it (2s + m, the gradient read once
  // for both operands); sqrt into a new tensor (2s); div_ by the bias correction (2s); add_ of
  // eps (2s); addcdiv_ of the parameters (2m + 2s).
  const double m = master_bytes(), s = state_elem_bytes();
  return (weight_decay_pass ? 2 * m : 0) + 14 * s + 4 * m;
}

double master_grad_copy_bytes(const DsConfig& c) {
  return master_grads_alias_grads(c) ? 0 : c.optimizer.master_bytes();
}

bool stage3_master_is_params(const DsConfig& c) {
  return c.zero.stage == 3 && c.zero.offload_optimizer.device == OffloadDevice::kNone &&
         c.optimizer.master_dtype == c.precision;
}

int sequence_parallel_size(const DsConfig& config) {
  auto it = config.other.find("sequence_parallel_size");
  if (it == config.other.end() || !it->is_number_integer()) return 1;
  return static_cast<int>(std::max<int64_t>(1, it->get<int64_t>()));
}

int autotp_size(const DsConfig& config) {
  auto it = config.other.find("tensor_parallel");
  if (it == config.other.end() || !it->is_object()) return 1;
  auto size = it->find("autotp_size");
  if (size == it->end() || !size->is_number_integer()) return 1;
  return static_cast<int>(std::max<int64_t>(1, size->get<int64_t>()));
}

bool autotp_overlap_comm(const DsConfig& config) {
  auto it = config.other.find("tensor_parallel");
  if (it == config.other.end() || !it->is_object()) return false;
  auto overlap = it->find("tp_overlap_comm");
  return overlap != it->end() && overlap->is_boolean() && overlap->get<bool>();
}


namespace {

using internal::AutoRule;
using internal::BlockReader;
using internal::check_unmodeled_top_keys;
using internal::Errors;
using internal::json_quoted;
using internal::kGasKey;
using internal::kMicroKey;
using internal::kTrainKey;
using internal::Locator;
using internal::Null;
using internal::product;
using internal::read_batch;
using internal::reject_other_communication_dtype;
using internal::top_block;
using nlohmann::json;

// What the Hugging Face Trainer fills an "auto" gradient_clipping with when the command line does
// not say: TrainingArguments' default max_grad_norm = 1.0 (reference §1.6).
constexpr double kTrainerMaxGradNorm = 1.0;

// Top-level keys that live only in DsConfig's fields, never in DsConfig::other.
constexpr std::string_view kModeledTopKeys[] = {"train_batch_size",
                                                "train_micro_batch_size_per_gpu",
                                                "gradient_accumulation_steps",
                                                "zero_optimization",
                                                "gradient_clipping",
                                                "bfloat16"};


// The cross-field invariants of a resolved DsConfig, for configs read from files and built in
// code alike.
void check_config(const DsConfig& c, int dp, const Locator& loc) {
  if (dp < 1)
    loc.fail("", "the data-parallel world size must be at least 1, got " + std::to_string(dp));
  internal::check_zero_optimization(c.zero, loc);
  internal::check_zeropp_mics(c.zero, dp, loc);
  auto positive = [&](const char* key, int64_t v) {
    if (v <= 0) loc.fail(std::string("/") + key, "must be positive, got " + std::to_string(v));
  };
  positive(kTrainKey, c.train_batch_size);
  positive(kMicroKey, c.micro_batch);
  positive(kGasKey, c.gradient_accumulation_steps);
  // Far beyond any real run, and small enough that every count derived from them is exact.
  auto at_most = [&](const char* key, int64_t v) {
    if (v > kMaxBatchCount) {
      loc.fail(std::string("/") + key, std::to_string(v) + " is more than the " +
                                           std::to_string(kMaxBatchCount) + " zplan accepts");
    }
  };
  at_most(kMicroKey, c.micro_batch);
  at_most(kGasKey, c.gradient_accumulation_steps);
  // With Ulysses sequence parallelism the batch keys count the world / sequence_parallel_size
  // (runtime/config.py DeepSpeedConfig.__init__); with AutoTP a step trains micro x gas x the
  // world / autotp_size samples (each tensor-parallel group shares its samples), which is what
  // train_batch_size holds here (ds_config_to_json writes DeepSpeed's own count).
  const int sp = sequence_parallel_size(c);
  if (dp % sp != 0) {
    loc.fail("/sequence_parallel_size", "Ulysses sequence parallel size " + std::to_string(sp) +
                                            " does not divide the " + std::to_string(dp) +
                                            " GPUs (DeepSpeed groups consecutive ranks)");
  }
  const int tp = autotp_size(c);
  if (dp % tp != 0) {
    loc.fail("/tensor_parallel/autotp_size", "AutoTP size " + std::to_string(tp) +
                                                 " does not divide the " + std::to_string(dp) +
                                                 " GPUs (DeepSpeed's device mesh needs it)");
  }
  const int data_parallel = dp / sp / tp;
  std::optional<int64_t> p =
      product(c.micro_batch, c.gradient_accumulation_steps, data_parallel);
  if (p != c.train_batch_size) {
    loc.fail(std::string("/") + kTrainKey,
             "train_batch_size " + std::to_string(c.train_batch_size) +
                 " must equal train_micro_batch_size_per_gpu " + std::to_string(c.micro_batch) +
                 " x gradient_accumulation_steps " + std::to_string(c.gradient_accumulation_steps) +
                 " x " + std::to_string(data_parallel) + " data-parallel GPUs");
  }
  // _do_optimizer_sanity_check (engine.py): without ZeRO (and without apex amp) the model and
  // accumulation dtypes must match.
  if (c.zero.stage == 0 && c.grad_accum_dtype != c.precision) {
    loc.fail("/data_types/grad_accum_dtype", std::string("DeepSpeed does not support ") +
                                                 precision_name(c.precision) + " training with " +
                                                 precision_name(c.grad_accum_dtype) +
                                                 " gradient accumulation without ZeRO (stage 0)");
  }
  const ActivationCheckpointingConfig& a = c.activation_checkpointing;
  if (a.enabled) {
    const std::string at = "/activation_checkpointing/";
    if (a.number_checkpoints && *a.number_checkpoints <= 0) {
      loc.fail(at + "number_checkpoints",
               "must be positive, got " + std::to_string(*a.number_checkpoints));
    }
    // checkpointing.configure asserts it. It also needs a layer count, but that may come from
    // configure's num_checkpoints argument instead of number_checkpoints (Megatron passes its
    // num_layers), so a file without number_checkpoints is accepted.
    if (a.contiguous_memory_optimization && !a.partition_activations) {
      loc.fail(at + "contiguous_memory_optimization", "needs partition_activations");
    }
  }
  auto aio_positive = [&](const char* key, int64_t v) {
    if (v <= 0) {
      loc.fail(std::string("/aio/") + key, "must be a positive integer, got " + std::to_string(v));
    }
  };
  aio_positive("block_size", c.aio.block_size);
  aio_positive("queue_depth", c.aio.queue_depth);
  aio_positive("intra_op_parallelism", c.aio.intra_op_parallelism);
  if (!std::isfinite(c.gradient_clipping) || c.gradient_clipping < 0) {
    loc.fail("/gradient_clipping", "must be a finite number >= 0 (0 turns clipping off), got " +
                                       json(c.gradient_clipping).dump());
  }
}

// DsConfig::other of a config built in code: an object without the keys DsConfig models.
void check_other(const DsConfig& c, const Locator& loc) {
  if (!c.other.is_object()) {
    loc.fail("", "DsConfig::other must be a JSON object, got " + describe_json_value(c.other));
  }
  for (std::string_view key : kModeledTopKeys) {
    if (c.other.contains(key)) {
      loc.fail("/" + std::string(key), "belongs in DsConfig's own fields, not in DsConfig::other");
    }
  }
  for (const internal::SharedBlock& block : internal::shared_blocks()) {
    auto it = c.other.find(block.name);
    if (it == c.other.end()) continue;
    const std::string at = std::string("/") + block.name;
    if (!it->is_object()) loc.fail(at, "must be an object, got " + describe_json_value(*it));
    for (std::string_view key : block.modeled) {
      if (it->contains(key)) {
        loc.fail(at + "/" + std::string(key),
                 "belongs in DsConfig's own fields, not in DsConfig::other");
      }
    }
  }
  internal::check_zero_other(c.zero, loc);
}

// --- the other top-level keys (config.py) ---

void read_gradient_clipping(const JsonReader& top, DsConfig& c) {
  if (top.is_auto("gradient_clipping")) {
    c.gradient_clipping = kTrainerMaxGradNorm;
  } else if (std::optional<double> v = top.optional_number("gradient_clipping")) {
    c.gradient_clipping = *v;
  }
}

// DsConfig::other keeps every top-level key DsConfig does not model, for writing back.
void keep_unmodeled_top_keys(const json& document, DsConfig& c) {
  const bool deprecated_zero =
      document.contains("zero_optimization") && document["zero_optimization"].is_boolean();
  for (const auto& item : document.items()) {
    // A plain reference, not a structured binding: clang 14 cannot capture those in a lambda.
    const std::string& key = item.key();
    const auto& value = item.value();
    const bool modeled = std::find(std::begin(kModeledTopKeys), std::end(kModeledTopKeys), key) !=
                             std::end(kModeledTopKeys) ||
                         std::ranges::any_of(
                             internal::shared_blocks(),
                             [&](const internal::SharedBlock& b) { return key == b.name; }) ||
                         (deprecated_zero && key == "allgather_size");
    if (!modeled) c.other[key] = value;
  }
}

// Keys DeepSpeed 0.19 reads only where they apply, which a file may keep where they do not:
// a file that does trains without them, so zplan reads it as DeepSpeed does and says so, one
// note per key. Below ZeRO stage 3: offload_param (engine.py _configure_zero_optimizer gives it to
// the stage-3 optimizer only, and zero.Init, its other reader, runs only at stage 3) and the
// ZeRO++ and MiCS keys -- hpZ's group and qwZ's quantized gather are made by
// partition_parameters.py Init, qgZ's all-to-all reduction is stage3.py's (the engine builds its
// process groups at any stage, engine.py _configure_distributed_model, but DeepSpeedZeroOptimizer
// of stages 1-2 never uses them), MiCS's optimizer is built in _configure_zero_optimizer's stage-3
// branch only. At stage 3 without a MiCS shard: mics_hierarchical_params_gather (read by
// mics.py's MiCS_Init alone, when it builds the shard's groups).
void ignore_keys_deepspeed_ignores(const Locator& locator, const ParseContext& context,
                                   DsConfig& c) {
  ZeroConfig& z = c.zero;
  const ZeroConfig defaults;
  auto ignore = [&](const char* key, const std::string& value, const std::string& where) {
    if (context.notes == nullptr) return;
    context.notes->push_back(locator.at(internal::kZ + key) + " is " + value +
                             ", which DeepSpeed reads " + where + ", as DeepSpeed ignores it");
  };
  if (z.stage != 3) {
    const std::string below = "only at ZeRO stage 3: ignored at stage " + std::to_string(z.stage);
    if (z.offload_param.device != OffloadDevice::kNone) {
      ignore("offload_param/device",
             "\"" + std::string(offload_device_name(z.offload_param.device)) + "\"", below);
      z.offload_param = defaults.offload_param;
    }
    if (z.hpz_partition_size > 1) {
      ignore("zero_hpz_partition_size", std::to_string(z.hpz_partition_size), below);
      z.hpz_partition_size = defaults.hpz_partition_size;
    }
    if (z.quantized_weights) {
      ignore("zero_quantized_weights", "true", below);
      z.quantized_weights = defaults.quantized_weights;
    }
    if (z.quantized_gradients) {
      ignore("zero_quantized_gradients", "true", below);
      z.quantized_gradients = defaults.quantized_gradients;
    }
    if (z.mics_shard_size > 0) {
      ignore("mics_shard_size", std::to_string(z.mics_shard_size), below);
      z.mics_shard_size = defaults.mics_shard_size;
    }
  }
  if (z.mics_hierarchical_params_gather && !z.mics()) {
    ignore("mics_hierarchical_params_gather", "true",
           z.stage == 3
               ? "only with mics_shard_size > 0: ignored without a MiCS shard"
               : "only at ZeRO stage 3 with MiCS: ignored at stage " + std::to_string(z.stage));
    z.mics_hierarchical_params_gather = defaults.mics_hierarchical_params_gather;
  }
}

// With AutoTP, DeepSpeedConfig checks the batch keys against the world it is given
// (runtime/config.py: mpu.get_data_parallel_world_size() = world / tp when deepspeed.initialize
// gets an mpu, dist.get_world_size() -- every GPU -- when it does not, as with the Hugging Face
// Trainer and Accelerate, whose "auto" train_batch_size is world x micro x gas too). zplan
// resolves the keys against world / tp, the samples a step trains; a file whose three keys are
// all numbers and multiply out over every GPU instead is read as the no-mpu count.
bool autotp_batch_counts_world(const JsonReader& top, const ParseContext& context) {
  for (const char* key : {kTrainKey, kMicroKey, kGasKey}) {
    if (!top.json().contains(key) || !top.json()[key].is_number_integer()) return false;
  }
  std::optional<int64_t> world =
      internal::product(top.json()[kMicroKey].get<int64_t>(), top.json()[kGasKey].get<int64_t>(),
                        context.dp_world_size);
  return world && *world == top.json()[kTrainKey].get<int64_t>();
}

}  // namespace

DsConfig parse_ds_config(const json& document, const std::string& file,
                         const ParseContext& context) {
  if (!document.is_object()) {
    throw InputError(file,
                     "a ds_config must be a JSON object, got " + describe_json_value(document));
  }
  if (context.dp_world_size < 1) {
    throw InputError(file, "the data-parallel world size must be at least 1, got " +
                               std::to_string(context.dp_world_size));
  }
  JsonReader top(document, file);
  Locator locator(file);
  DsConfig c;
  // Each step reads its own keys; a problem in one does not stop the others (Errors).
  Errors errors;
  c.zero = internal::read_zero_optimization(top, context, locator, errors);
  // The batch keys count data-parallel ranks: the world over the sequence-parallel size, and
  // over the AutoTP size (what a step trains; a file may also count every GPU, as DeepSpeed's
  // batch check does when deepspeed.initialize gets no mpu: autotp_batch_counts_world).
  ParseContext batch_context = context;
  errors.step([&] {
    batch_context.dp_world_size /= internal::read_sequence_parallel(top, context.dp_world_size);
  });
  int tp = 1;
  errors.step([&] {
    tp = internal::read_autotp_size(top, context.dp_world_size);
    batch_context.dp_world_size /= tp;
  });
  errors.step([&] {
    if (tp > 1 && autotp_batch_counts_world(top, context)) {
      // Read the batch keys as the samples a step trains: train_batch_size / tp.
      json samples = document;
      samples[kTrainKey] = document[kTrainKey].get<int64_t>() / tp;
      read_batch(JsonReader(samples, file), batch_context, c);
      if (context.notes != nullptr) {
        context.notes->push_back(
            "train_batch_size " + std::to_string(c.train_batch_size * tp) + " counts all " +
            std::to_string(context.dp_world_size) +
            " GPUs, as DeepSpeed's batch check does when deepspeed.initialize gets no mpu (the "
            "Hugging Face Trainer, Accelerate); a step trains " +
            std::to_string(c.train_batch_size) + " samples (AutoTP " + std::to_string(tp) +
            ": each tensor-parallel group shares its samples)");
      }
    } else {
      read_batch(top, batch_context, c);
    }
  });
  internal::MasterFlags master_flags;
  errors.step([&] { internal::read_precision(top, context, c, errors, &master_flags); });
  errors.step([&] { internal::read_activation_checkpointing(top, context, c); });
  errors.step([&] { internal::read_aio(top, c); });
  errors.step([&] { read_gradient_clipping(top, c); });
  errors.step([&] { c.optimizer = internal::read_optimizer(top, c, context.notes); });
  errors.step([&] { internal::read_master_precision(master_flags, context.notes, c); });
  keep_unmodeled_top_keys(document, c);
  internal::note_unknown_top_keys(document, file, context.notes);
  check_unmodeled_top_keys(top, errors);
  errors.throw_if_any();
  ignore_keys_deepspeed_ignores(locator, context, c);
  if (uses_bf16_optimizer(c) && context.notes != nullptr) {
    context.notes->push_back(
        locator.at("/data_types/grad_accum_dtype") +
        " is fp32 with bf16 at ZeRO stage 1: DeepSpeed runs BF16_Optimizer there, not the ZeRO-1 "
        "optimizer (a full-size fp32 gradient buffer on every GPU, all-reduced at the boundary; "
        "optimizer states partitioned), and zplan predicts that");
  }
  // The cross-field checks need every value read, so they come after.
  check_config(c, context.dp_world_size, locator);
  internal::reject_unmodeled_zero_features(c.zero, locator);
  reject_other_communication_dtype(top, c);
  return c;
}

DsConfig load_ds_config(const std::string& path, const ParseContext& context) {
  return parse_ds_config(load_json_file(path, JsonDialect::kDeepSpeedConfig), path, context);
}

void complete_ds_config(DsConfig& c, const ParseContext& context, const std::string& where) {
  if (context.dp_world_size < 1) {
    throw InputError(where, "the data-parallel world size must be at least 1, got " +
                                std::to_string(context.dp_world_size));
  }
  Locator locator(where);
  // In parse_ds_config's order: the stage as it is read, the batch keys, then the whole.
  internal::check_stage(c.zero.stage, locator);
  // The batch keys count the data-parallel ranks (check_config): the GPUs over the sequence-
  // and tensor-parallel sizes already in c.other. One that does not divide them is check_config's
  // error, after resolving against every GPU.
  const int split = sequence_parallel_size(c) * autotp_size(c);
  const int ranks = context.dp_world_size % split == 0 ? context.dp_world_size / split
                                                       : context.dp_world_size;
  internal::resolve_batch(
      internal::batch_flag(kMicroKey, "--micro-batch", context.micro_batch),
      internal::batch_flag(kGasKey, "--gas", context.gradient_accumulation_steps),
      internal::batch_flag(kTrainKey, "--global-batch", context.train_batch_size),
      ranks, [&](const char*) { return json_location(where, ""); }, c);
  check_other(c, locator);
  check_config(c, context.dp_world_size, locator);
  internal::reject_unmodeled_zero_features(c.zero, locator);
}

void validate_ds_config(const DsConfig& config, int dp_world_size, const std::string& where) {
  Locator locator(where);
  check_other(config, locator);
  check_config(config, dp_world_size, locator);
  internal::reject_unmodeled_zero_features(config.zero, locator);
  // The blocks passed through in DsConfig::other get the checks a file's would: the fp16/bf16
  // members DsConfig does not model, and the top-level keys it keeps whole.
  // A block's checks that depend on "enabled" see the config's precision ("auto" stands for it).
  json blocks = json::object();
  for (const char* name : {"fp16", "bf16"}) {
    auto it = config.other.find(name);
    if (it == config.other.end() || !it->is_object()) continue;
    blocks[name] = *it;
    blocks[name]["enabled"] = "auto";
  }
  ParseContext context;
  context.dp_world_size = dp_world_size;
  context.auto_precision = config.precision;
  const JsonReader precision_blocks(blocks, where);
  const JsonReader other(config.other, where);
  Errors errors;
  DsConfig scratch;  // what read_precision_block keeps of the blocks is already in config.other
  errors.step([&] {
    internal::read_precision_block(precision_blocks, "fp16", true, context, config.zero.stage,
                                   scratch, errors);
  });
  errors.step([&] {
    internal::read_precision_block(precision_blocks, "bf16", false, context, config.zero.stage,
                                   scratch, errors);
  });
  check_unmodeled_top_keys(other, errors);
  errors.step([&] {
    // The optimizer block written out must be the optimizer the prediction assumed.
    const OptimizerConfig written = internal::read_optimizer(other, config, nullptr);
    if (written.states != config.optimizer.states || written.cpu != config.optimizer.cpu) {
      other.fail("optimizer", "builds " + written.name + ", but DsConfig::optimizer is " +
                                  config.optimizer.name);
    }
  });
  errors.throw_if_any();
  reject_other_communication_dtype(other, config);
}

json ds_config_to_json(const DsConfig& c) {
  json j = c.other.is_object() ? c.other : json::object();
  for (std::string_view key : kModeledTopKeys) j.erase(std::string(key));
  auto block = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_object() ? *it : json::object();
  };
  auto put = [&](const char* key, json value) {
    if (value.empty()) {
      j.erase(key);
    } else {
      j[key] = std::move(value);
    }
  };
  // AutoTP: DeepSpeed's own count, over every GPU (autotp_batch_counts_world): what the
  // Hugging Face Trainer's check (world x micro x gas), Accelerate and deepspeed.initialize
  // without an mpu expect, and what zplan reads back as the same samples per step.
  j[kTrainKey] = c.train_batch_size * autotp_size(c);
  j[kMicroKey] = c.micro_batch;
  j[kGasKey] = c.gradient_accumulation_steps;
  j["gradient_clipping"] = c.gradient_clipping;

  // fp32 training says so in both blocks: without them the Hugging Face Trainer
  // (HfTrainerDeepSpeedConfig.trainer_config_process: "deepspeed's default mode is fp16 unless
  // there is a config that says differently") and Accelerate take the model to be fp16.
  json fp16 = block("fp16");
  if (c.precision == Precision::kFp16) fp16["enabled"] = true;
  if (c.precision == Precision::kFp32) fp16["enabled"] = false;
  put("fp16", std::move(fp16));
  json bf16 = block("bf16");
  if (c.precision == Precision::kBf16) bf16["enabled"] = true;
  if (c.precision == Precision::kFp32) bf16["enabled"] = false;
  put("bf16", std::move(bf16));
  json data_types = block("data_types");
  if (c.grad_accum_dtype != c.precision) {
    data_types["grad_accum_dtype"] = precision_name(c.grad_accum_dtype);
  }
  put("data_types", std::move(data_types));

  const ActivationCheckpointingConfig& a = c.activation_checkpointing;
  if (a.enabled) {
    json ac = block("activation_checkpointing");
    ac["partition_activations"] = a.partition_activations;
    ac["cpu_checkpointing"] = a.cpu_checkpointing;
    ac["contiguous_memory_optimization"] = a.contiguous_memory_optimization;
    if (a.number_checkpoints) ac["number_checkpoints"] = *a.number_checkpoints;
    ac["synchronize_checkpoint_boundary"] = a.synchronize_checkpoint_boundary;
    ac["profile"] = a.profile;
    j["activation_checkpointing"] = std::move(ac);
  } else {
    j.erase("activation_checkpointing");
  }
  if (internal::uses_nvme(c.zero) || !internal::aio_is_default(c.aio) || j.contains("aio")) {
    json aio = block("aio");
    aio["block_size"] = c.aio.block_size;
    aio["queue_depth"] = c.aio.queue_depth;
    aio["intra_op_parallelism"] = c.aio.intra_op_parallelism;
    aio["single_submit"] = c.aio.single_submit;
    aio["overlap_events"] = c.aio.overlap_events;
    aio["use_gds"] = c.aio.use_gds;
    j["aio"] = std::move(aio);
  }
  j["zero_optimization"] = internal::zero_optimization_to_json(c.zero);
  return j;
}

}  // namespace zplan::sim
