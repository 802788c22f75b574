// The top-level blocks DsConfig models in part and shares with DsConfig::other, read the way
// DeepSpeed 0.19 reads them: fp16 and bf16 (precision_config.py), data_types (config.py),
// activation_checkpointing (activation_checkpointing/config.py) and aio
// (swap_tensor/aio_config.py). What DsConfig does not model of them stays in DsConfig::other for
// writing back. zero_config.cc calls these readers in its read steps. Sources:
// reference/deepspeed_internals.md §1.2, §1.4, §1.5.
#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/input_error.h"
#include "base/json_reader.h"
#include "sim/ds_config/zero_config_internal.h"

namespace zplan::sim::internal {

using nlohmann::json;

namespace {

// DeepSpeedFP16Config and DeepSpeedBF16Config (precision_config.py, reference §1.4).
constexpr std::string_view kFp16Keys[] = {"enabled",
                                          "auto_cast",
                                          "loss_scale",
                                          "initial_scale_power",
                                          "loss_scale_window",
                                          "hysteresis",
                                          "consecutive_hysteresis",
                                          "min_loss_scale",
                                          "fp16_master_weights_and_grads"};
constexpr std::string_view kBf16Keys[] = {"enabled", "immediate_grad_update", "check_grad_overflow",
                                          "bf16_master_weights_and_grads", "bf16_optimizer_states"};
// Keys of the plain-dict blocks that DsConfig models; DeepSpeed ignores any others in them, and
// zplan keeps those in DsConfig::other.
constexpr std::string_view kActivationCheckpointingKeys[] = {
    "partition_activations",           "cpu_checkpointing",
    "contiguous_memory_optimization",  "number_checkpoints",
    "synchronize_checkpoint_boundary", "profile"};
constexpr std::string_view kAioKeys[] = {"block_size",    "queue_depth",    "intra_op_parallelism",
                                         "single_submit", "overlap_events", "use_gds"};

constexpr std::string_view kEnabled[] = {"enabled"};
constexpr std::string_view kGradAccumDtype[] = {"grad_accum_dtype"};
constexpr SharedBlock kSharedBlocks[] = {{"fp16", kEnabled},
                                         {"bf16", kEnabled},
                                         {"data_types", kGradAccumDtype},
                                         {"activation_checkpointing", kActivationCheckpointingKeys},
                                         {"aio", kAioKeys}};

// The members of `block` other than `modeled` ones and dropped "auto"s: what DsConfig::other
// keeps of a block DsConfig models only in part.
json unmodeled_members(const json& block, std::span<const std::string_view> modeled,
                       AutoRule auto_rule) {
  json out = json::object();
  for (const auto& [key, value] : block.items()) {
    if (std::find(modeled.begin(), modeled.end(), key) != modeled.end()) continue;
    if (auto_rule == AutoRule::kMeansDefault && value.is_string() &&
        value.get_ref<const std::string&>() == "auto") {
      continue;
    }
    out[key] = value;
  }
  return out;
}

// DtypeEnum in config.py: each dtype under all the names it accepts.
std::optional<Precision> parse_dtype(const std::string& name) {
  static constexpr std::pair<std::string_view, Precision> kNames[] = {
      {"fp16", Precision::kFp16},           {"float16", Precision::kFp16},
      {"half", Precision::kFp16},           {"torch.float16", Precision::kFp16},
      {"bf16", Precision::kBf16},           {"bfloat16", Precision::kBf16},
      {"torch.bfloat16", Precision::kBf16}, {"fp32", Precision::kFp32},
      {"float32", Precision::kFp32},        {"float", Precision::kFp32},
      {"torch.float32", Precision::kFp32}};
  for (const auto& [n, p] : kNames) {
    if (n == name) return p;
  }
  return std::nullopt;
}

bool has_block(const JsonReader& top, const char* name) {
  auto it = top.json().find(name);
  return it != top.json().end() && !it->is_null();
}

}  // namespace

std::span<const SharedBlock> shared_blocks() { return kSharedBlocks; }

// --- fp16 / bf16 / data_types (precision_config.py, config.py, §1.4) ---

// Reads fp16 or bf16 (`name` is the key the file uses) and returns whether it is enabled.
bool read_precision_block(const JsonReader& top, const char* name, bool fp16,
                          const ParseContext& context, int stage, DsConfig& c, Errors& errors,
                          MasterFlags* flags) {
  std::optional<JsonReader> r = top_block(top, name, fp16 ? Null::kRejected : Null::kMeansDefault);
  if (!r) return false;
  std::span<const std::string_view> keys = fp16 ? std::span<const std::string_view>(kFp16Keys)
                                                : std::span<const std::string_view>(kBf16Keys);
  reject_unknown_keys(*r, keys, AutoRule::kMeansDefault,
                      fp16 ? "DeepSpeedFP16Config (fp16)" : "DeepSpeedBF16Config (bf16)", errors);
  BlockReader b(*r, AutoRule::kMeansDefault);
  const Precision self = fp16 ? Precision::kFp16 : Precision::kBf16;
  bool enabled =
      r->is_auto("enabled") ? context.auto_precision == self : b.boolean("enabled").value_or(false);
  // Reads a master-weights flag once and returns it; the flags need a ZeRO optimizer.
  auto needs_zero = [&](const char* key) {
    const bool on = b.boolean(key).value_or(false);
    if (on && stage == 0) {
      r->fail(key, "is only supported with ZeRO stages 1, 2 and 3, but stage is 0");
    }
    return on;
  };
  if (fp16) {
    b.boolean("auto_cast");
    b.boolean("consecutive_hysteresis");
    b.integer("initial_scale_power");
    b.integer("hysteresis");
    double loss_scale = b.number("loss_scale").value_or(0);
    if (loss_scale < 0) r->fail("loss_scale", "must not be negative (0 means dynamic scaling)");
    int64_t window = b.integer("loss_scale_window").value_or(1000);
    int64_t min_scale = b.integer("min_loss_scale").value_or(1);
    if (enabled && loss_scale == 0 && window <= 0) {
      r->fail("loss_scale_window", "must be positive with dynamic loss scaling (loss_scale 0)");
    }
    if (enabled && loss_scale == 0 && min_scale <= 0) {
      r->fail("min_loss_scale", "must be positive with dynamic loss scaling (loss_scale 0)");
    }
    const bool fp16_master = needs_zero("fp16_master_weights_and_grads");
    if (flags != nullptr && fp16_master) flags->fp16_master = *r;
  } else {
    b.boolean("immediate_grad_update");
    b.boolean("check_grad_overflow");
    const bool bf16_master = needs_zero("bf16_master_weights_and_grads");
    const bool bf16_states = needs_zero("bf16_optimizer_states");
    if (bf16_states && !bf16_master) {
      r->fail("bf16_optimizer_states", "requires bf16_master_weights_and_grads");
    }
    if (flags != nullptr && bf16_master) {
      flags->bf16_master = *r;
      flags->bf16_states = bf16_states;
    }
  }
  json extras = unmodeled_members(r->json(), kEnabled, AutoRule::kMeansDefault);
  if (!extras.empty()) c.other[fp16 ? "fp16" : "bf16"] = std::move(extras);
  return enabled;
}

// Low-precision master weights (DeepSpeed PR #7700, 0.18.3; base_optimizer.py
// _configure_master_weights, stage_1_and_2.py and stage3.py _enforce_cpu_offload at v0.19.5):
// the ZeRO optimizer keeps its master partition and gradients in the 16-bit dtype, and with
// bf16_optimizer_states Adam's moments too. The engine passes the flags whether or not their
// block is enabled (engine.py _configure_zero_optimizer), and only to the ZeRO optimizers.
void read_master_precision(const MasterFlags& flags, std::vector<std::string>* notes,
                           DsConfig& c) {
  const std::optional<JsonReader>& fp16_mw = flags.fp16_master;
  const std::optional<JsonReader>& bf16_mw = flags.bf16_master;
  const bool bf16_states = flags.bf16_states;
  if (!fp16_mw && !bf16_mw) return;
  const JsonReader& r = bf16_mw ? *bf16_mw : *fp16_mw;
  const char* key = bf16_mw ? "bf16_master_weights_and_grads" : "fp16_master_weights_and_grads";
  if (fp16_mw && bf16_mw) {
    r.fail(key, "fp16_master_weights_and_gradients and bf16_master_weights_and_gradients are "
                "mutually exclusive (DeepSpeed asserts it, _configure_master_weights)");
  }
  if (uses_bf16_optimizer(c)) {
    // Stage 1 in bf16 with fp32 gradient accumulation runs BF16_Optimizer, which is not given
    // the flags: its master weights stay fp32.
    if (notes != nullptr) {
      notes->push_back(r.location(key) + ": BF16_Optimizer (stage 1, bf16, grad_accum_dtype "
                                         "fp32) is not given it: master weights stay fp32");
    }
    return;
  }
  const OffloadOptimizerConfig& opt = c.zero.offload_optimizer;
  const bool offload = opt.device != OffloadDevice::kNone;
  // The validator runs unless bf16 states stay on the GPU, and wants DeepSpeedCPUAdam: what an
  // Adam/AdamW block builds under offload, or the script's own optimizer (no block), which
  // Accelerate makes DeepSpeedCPUAdam.
  if (fp16_mw || !bf16_states || offload) {
    const bool cpu_adam = !c.optimizer.from_file || c.optimizer.cpu_name == "DeepSpeedCPUAdam";
    if (!offload || !cpu_adam) {
      r.fail(key, std::string("Master weights feature requires ZeRO") +
                      (c.zero.stage == 3 ? "-3" : "") + " Offload with DeepSpeedCPUAdam "
                      "(DeepSpeed asserts it, _enforce_cpu_offload)" +
                      (offload ? "; the optimizer block builds " + c.optimizer.cpu_name
                               : std::string(": add an offload_optimizer block") +
                                     (fp16_mw ? "" : ", or bf16_optimizer_states")));
    }
  }
  // (At stages 1-2 DeepSpeed offloads "nvme" to CPU memory; check_config refuses that.)
  if (opt.device == OffloadDevice::kNvme && c.zero.stage == 3) {
    r.fail(key, "not modelled: 16-bit master weights swapped to NVMe; offload the optimizer to "
                "the cpu to plan them");
  }
  if (offload && opt.ratio < 1) {
    r.fail(key, "not modelled: 16-bit master weights with a partial offload ratio; remove "
                "\"ratio\" to plan them");
  }
  // bf16 states with offload: the engine makes an Adam block's DeepSpeedCPUAdam with
  // fp32_optimizer_states False (engine.py _configure_basic_optimizer), then asserts it
  // (base_optimizer.py _configure_master_weights). The script's optimizer is Accelerate's
  // DeepSpeedCPUAdam(param_groups, lr, weight_decay), which keeps fp32 states, and fails it.
  if (bf16_mw && bf16_states && offload && !c.optimizer.from_file) {
    r.fail("bf16_optimizer_states",
           "with ZeRO-Offload requires DeepSpeedCPUAdam constructed with "
           "fp32_optimizer_states=False (DeepSpeed asserts it); with no \"optimizer\" block the "
           "script's optimizer steps, and Accelerate's DeepSpeedCPUAdam keeps fp32 states: add "
           "an \"optimizer\" block of type AdamW");
  }
  const Precision master = bf16_mw ? Precision::kBf16 : Precision::kFp16;
  c.optimizer.master_dtype = master;
  // The states take the master's dtype with bf16_optimizer_states, or when the CPU Adam is
  // built with fp32_optimizer_states false (cpu_adam.py: state_dtype = p.dtype).
  const bool cpu_low_states = offload && c.optimizer.from_file && !c.optimizer.cpu_fp32_states;
  if ((bf16_mw && bf16_states) || cpu_low_states) c.optimizer.state_dtype = master;
}

void read_precision(const JsonReader& top, const ParseContext& context, DsConfig& c,
                    Errors& errors, MasterFlags* flags) {
  bool fp16 = read_precision_block(top, "fp16", true, context, c.zero.stage, c, errors, flags);
  // get_bfloat16_config: "bf16" when present and not null, else the old name "bfloat16".
  const char* bf16_name = has_block(top, "bf16") ? "bf16" : "bfloat16";
  bool bf16 =
      read_precision_block(top, bf16_name, false, context, c.zero.stage, c, errors, flags);
  auto enabled_is_auto = [&](const char* name) {
    auto it = top.json().find(name);
    return it != top.json().end() && it->is_object() && JsonReader(*it, "").is_auto("enabled");
  };
  // "enabled": "auto" in either block leaves the precision to the launcher's mixed-precision
  // flag, which --precision stands for (its default, zplan's bf16 or fp16 on GPUs without bf16,
  // when not given). Accelerate (DeepSpeedPlugin.set_mixed_precision, accelerate/utils/
  // dataclasses.py) inserts {"enabled": true} for the asked precision when the file has no block
  // of that name, which is how the Trainer's --bf16 trains a file holding only
  // "fp16": {"enabled": "auto"} in bf16. A file with no block at all is read as DeepSpeed reads
  // it (fp32) unless --precision says otherwise.
  const bool any_auto = enabled_is_auto("fp16") || enabled_is_auto(bf16_name);
  if ((context.precision_from_flag || any_auto) && !fp16 && !bf16) {
    if (context.auto_precision == Precision::kBf16 && !has_block(top, "bf16") &&
        !has_block(top, "bfloat16")) {
      bf16 = true;
    } else if (context.auto_precision == Precision::kFp16 && !has_block(top, "fp16")) {
      fp16 = true;
    }
  }
  if (!context.precision_from_flag && any_auto && context.notes != nullptr) {
    context.notes->push_back(
        top.location() + " leaves the precision to the launcher (\"enabled\": \"auto\"): read as " +
        precision_name(fp16 ? Precision::kFp16 : bf16 ? Precision::kBf16 : Precision::kFp32) +
        " training, as the Trainer's --" + precision_name(context.auto_precision) +
        " gives it; say --precision bf16, fp16 or fp32 if the launch says otherwise");
  }
  if (!context.precision_from_flag && !fp16 && !bf16 && !any_auto && !has_block(top, "bf16") &&
      !has_block(top, "bfloat16") && !has_block(top, "fp16") && context.notes != nullptr) {
    context.notes->push_back(
        top.location() +
        " has no bf16 or fp16 block: fp32 training, as DeepSpeed reads it, unless the launcher "
        "says otherwise (the Trainer's --bf16 or --fp16 makes Accelerate insert the block); say "
        "so with --precision bf16 or fp16");
  }
  if (fp16 && bf16) {
    top.fail(bf16_name, std::string("bf16 and fp16 cannot both be enabled (DeepSpeed asserts it)") +
                            (enabled_is_auto("fp16") || enabled_is_auto(bf16_name)
                                 ? "; \"enabled\": \"auto\" follows the precision asked for"
                                 : ""));
  }
  c.precision = fp16 ? Precision::kFp16 : bf16 ? Precision::kBf16 : Precision::kFp32;
  c.grad_accum_dtype = c.precision;
  if (context.precision_from_flag && c.precision != context.auto_precision) {
    const std::string says =
        std::string(", but --precision says ") + precision_name(context.auto_precision);
    if (fp16) top.fail("fp16", "is enabled in the file (fp16 training)" + says);
    if (bf16) top.fail(bf16_name, "is enabled in the file (bf16 training)" + says);
    top.fail("enables neither bf16 nor fp16 (fp32 training)" + says);
  }

  // data_types is read with dict.get: null or a non-object breaks DeepSpeed.
  std::optional<JsonReader> d = top_block(top, "data_types", Null::kRejected);
  if (!d) return;
  if (std::optional<std::string> name = d->optional_string("grad_accum_dtype")) {
    std::optional<Precision> p = parse_dtype(*name);
    if (!p) {
      d->fail("grad_accum_dtype",
              "must be \"fp32\", \"fp16\" or \"bf16\" (or another name "
              "DeepSpeed's DtypeEnum gives them), got " +
                  json_quoted(*name));
    }
    c.grad_accum_dtype = *p;
  }
  json extras = unmodeled_members(d->json(), kGradAccumDtype, AutoRule::kIsAnError);
  if (!extras.empty()) c.other["data_types"] = std::move(extras);
}

// --- activation_checkpointing (activation_checkpointing/config.py, §1.5) and aio (§1.2) ---

// DeepSpeedActivationCheckpointingConfig reads the block's six keys with get_scalar_param and
// ignores any other key; the flags are then tested with Python's `if` (checkpointing.py
// configure), so a non-boolean counts as its truth value. The block configures
// deepspeed.checkpointing; it never turns checkpointing on: the model code does (the Trainer's
// --gradient_checkpointing, Megatron-DeepSpeed's --checkpoint-activations). zplan reads the
// block as the statement that the model checkpoints every layer (the planner writes it when its
// plan does), and the command line says so unless --checkpointing gave the choice.
void read_activation_checkpointing(const JsonReader& top, const ParseContext& context,
                                   DsConfig& c) {
  // DeepSpeed reads the block with get_scalar_param on whatever is there: null breaks it.
  std::optional<JsonReader> r = top_block(top, "activation_checkpointing", Null::kRejected);
  if (!r) return;
  ActivationCheckpointingConfig& a = c.activation_checkpointing;
  a.enabled = true;
  auto note = [&](const std::string& text) {
    if (context.notes != nullptr) context.notes->push_back(text);
  };
  auto flag = [&](const char* key, bool& out) {
    auto it = r->json().find(key);
    if (it == r->json().end()) return;
    out = python_truthy(*it);
    if (!it->is_boolean() && !it->is_null()) {
      note(r->location(key) + " is " + describe_json_value(*it) + ", which DeepSpeed tests as " +
           "Python does: " + (out ? "true" : "false"));
    }
  };
  flag("partition_activations", a.partition_activations);
  flag("cpu_checkpointing", a.cpu_checkpointing);
  flag("contiguous_memory_optimization", a.contiguous_memory_optimization);
  flag("synchronize_checkpoint_boundary", a.synchronize_checkpoint_boundary);
  flag("profile", a.profile);
  // get_scalar_param takes any value, and checkpointing.py reads it only to size the contiguous
  // buffers, where configure's num_checkpoints argument (Megatron's layer count) replaces it.
  // false, as real configs copied from DeepSpeed's activation-checkpointing docs write it, is
  // then as good as absent.
  const auto n_it = r->json().find("number_checkpoints");
  if (n_it != r->json().end() && *n_it == false) {
    note(r->location("number_checkpoints") + " is false: read as not given (the layer count "
         "then comes from the model code's checkpointing.configure call)");
  } else if (std::optional<int64_t> n = r->optional_integer("number_checkpoints")) {
    if (*n <= 0) r->fail("number_checkpoints", "must be positive, got " + std::to_string(*n));
    a.number_checkpoints = *n;
  }
  for (const auto& item : r->json().items()) {
    const std::string& key = item.key();
    if (std::find(std::begin(kActivationCheckpointingKeys), std::end(kActivationCheckpointingKeys),
                  key) != std::end(kActivationCheckpointingKeys)) {
      continue;
    }
    note(r->location(key) +
         " is not a key DeepSpeed's activation-checkpointing config reads: ignored, as DeepSpeed "
         "ignores it" +
         did_you_mean(key, kActivationCheckpointingKeys));
  }
  json extras = unmodeled_members(r->json(), kActivationCheckpointingKeys, AutoRule::kIsAnError);
  if (!extras.empty()) c.other["activation_checkpointing"] = std::move(extras);
}

void read_aio(const JsonReader& top, DsConfig& c) {
  std::optional<JsonReader> r = top_block(top, "aio", Null::kMeansDefault);
  if (!r) return;
  AioConfig& a = c.aio;
  auto count = [&](const char* key, int64_t& out) {
    if (r->has(key)) out = r->positive_integer(key);
  };
  auto flag = [&](const char* key, bool& out) {
    if (std::optional<bool> v = r->optional_boolean(key)) out = *v;
  };
  count("block_size", a.block_size);
  count("queue_depth", a.queue_depth);
  count("intra_op_parallelism", a.intra_op_parallelism);
  flag("single_submit", a.single_submit);
  flag("overlap_events", a.overlap_events);
  flag("use_gds", a.use_gds);
  // Unknown keys, such as thread_count (renamed intra_op_parallelism in DeepSpeed 0.17, then
  // ignored), are kept: DeepSpeed ignores them too.
  json extras = unmodeled_members(r->json(), kAioKeys, AutoRule::kIsAnError);
  if (!extras.empty()) c.other["aio"] = std::move(extras);
}

bool aio_is_default(const AioConfig& a) {
  const AioConfig d;
  return a.block_size == d.block_size && a.queue_depth == d.queue_depth &&
         a.intra_op_parallelism == d.intra_op_parallelism && a.single_submit == d.single_submit &&
         a.overlap_events == d.overlap_events && a.use_gds == d.use_gds;
}

}  // namespace zplan::sim::internal
