// The top-level ds_config keys that DsConfig keeps whole in DsConfig::other, and what DeepSpeed
// 0.19 checks in them or zplan refuses there (deepspeed/runtime/config.py and the config classes
// each comment names): communication_data_type, compile, amp, tensor_parallel (AutoTP), the
// sequence parallel keys and elasticity. zero_config.cc calls check_unmodeled_top_keys for a file and for a config built
// in code alike. Sources: reference/deepspeed_internals.md §1.
#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/input_error.h"
#include "base/json_reader.h"
#include "sim/ds_config/zero_config_internal.h"

namespace zplan::sim::internal {

namespace {

// get_communication_data_type (config.py) lower-cases it and accepts three names.
void check_communication_data_type(const JsonReader& top) {
  if (std::optional<std::string> v = top.optional_string("communication_data_type")) {
    const std::string lower = ascii_lower(*v);
    if (lower != "fp16" && lower != "bf16" && lower != "fp32") {
      top.fail("communication_data_type",
               "must be \"fp16\", \"bf16\" or \"fp32\", got " + json_quoted(*v));
    }
  }
}

// Apex amp (an "amp" block) is neither fp16 nor bf16 as DsConfig models them.
void reject_apex_amp(const JsonReader& top) {
  if (auto amp = top_block(top, "amp", Null::kMeansDefault)) {
    if (amp->json().contains("enabled") && amp->json()["enabled"] == true) {
      amp->fail("enabled",
                "not modelled: apex amp mixed precision (its own master weights and loss "
                "scaling); use \"fp16\" or \"bf16\" to plan DeepSpeed's own mixed precision");
    }
  }
}

// CompileConfig (deepspeed/compile/config.py, DeepSpeed 0.19.5), read by DeepSpeedConfig with
// extra="forbid". torch.compile itself runs only when the script calls engine.compile(); zplan
// times eager kernels either way. DeepCompile replaces ZeRO-3's hooks with compiled passes of its
// own schedule, which zplan does not model.
constexpr std::string_view kCompileKeys[] = {"deepcompile",
                                             "free_activation",
                                             "free_activation_threshold",
                                             "offload_activation",
                                             "offload_opt_states",
                                             "double_buffer",
                                             "symmetric_memory",
                                             "debug_log",
                                             "offload_parameters",
                                             "sync_before_reduce",
                                             "sync_after_reduce",
                                             "sync_before_allgather",
                                             "sync_after_allgather",
                                             "keep_int_input_tensors",
                                             "keep_all_input_tensors",
                                             "passes"};

void read_compile(const JsonReader& top, Errors& errors) {
  reject_pydantic_switch(top, "compile", kCompileKeys, "CompileConfig (compile)", "deepcompile",
                         "not modelled: DeepCompile (compiled ZeRO passes with their own "
                         "prefetch and release schedule); remove it to plan plain ZeRO",
                         errors);
}

// tensor_parallel (TPTrainingConfig, deepspeed/runtime/tensor_parallel/config.py, a
// DeepSpeedConfigModel: extra="forbid", aliases accepted): autotp_size > 1 turns on AutoTP
// training (engine.py _configure_tensor_parallel; docs/cost_model.md "AutoTP tensor
// parallelism"), 0 or 1 leaves it off. What else the block holds, as DeepSpeed uses it in
// training: tp_overlap_comm (modelled: the column-split layers' input-gradient all-reduce runs
// beside their weight-gradient GEMM, layers.py AsyncColumnParallel); the "tp" block (TPConfig,
// alias "tensor_parallel"), whose tp_size must be 1 or autotp_size (_apply_autotp_partitioning
// raises ValueError otherwise); keep_module_on_host and kernel_inject, which change loading and
// inference only. partition_config and preset_model choose other split rules than the ones zplan
// models; dtype converts the model outside the fp16/bf16 blocks; injection_policy_tuple and the
// tp block's mpu and tp_group are Python objects: refused.
constexpr std::string_view kTensorParallelKeys[] = {
    "dtype",          "autotp_size",         "tp_overlap_comm", "tensor_parallel",
    "tp",             "injection_policy_tuple", "partition_config", "preset_model",
    "keep_module_on_host", "replace_with_kernel_inject", "kernel_inject"};
constexpr std::string_view kTpConfigKeys[] = {"tp_size", "tp_grain_size", "mpu", "tp_group"};

void check_tensor_parallel_block(const JsonReader& top, Errors& errors) {
  std::optional<JsonReader> r = top_block(top, "tensor_parallel", Null::kRejected);
  if (!r) return;
  reject_unknown_keys(*r, kTensorParallelKeys, AutoRule::kMeansDefault,
                      "TPTrainingConfig (tensor_parallel)", errors);
  const BlockReader b(*r, AutoRule::kMeansDefault);
  int64_t tp = 0;
  errors.step([&] { tp = b.integer("autotp_size").value_or(0); });
  errors.step([&] { b.boolean("tp_overlap_comm"); });
  errors.step([&] { b.boolean("keep_module_on_host"); });
  for (const char* key : {"replace_with_kernel_inject", "kernel_inject"}) {
    errors.step([&] { b.boolean(key); });
  }
  for (const char* key : {"partition_config", "preset_model"}) {
    errors.step([&] {
      if (b.given(key) && !r->json()[key].is_null()) {
        r->fail(key, "not modelled: AutoTP partition rules other than its defaults (each "
                     "block's q/k/v and MLP input projections split by columns, the attention "
                     "and MLP output projections by rows); remove it to plan those");
      }
    });
  }
  for (const char* key : {"dtype", "injection_policy_tuple"}) {
    errors.step([&] {
      if (b.given(key) && !r->json()[key].is_null()) {
        r->fail(key, std::string("not modelled: ") +
                         (std::string_view(key) == "dtype"
                              ? "a tensor-parallel model dtype (zplan trains in the fp16/bf16 "
                                "blocks' precision); remove it"
                              : "an injection policy (a Python tuple of module names); remove it"));
      }
    });
  }
  for (const char* name : {"tp", "tensor_parallel"}) {
    errors.step([&] {
      const nlohmann::json* tp_block = b.object(name, Null::kMeansDefault);
      if (tp_block == nullptr) return;
      const JsonReader t = r->child(name);
      reject_unknown_keys(t, kTpConfigKeys, AutoRule::kMeansDefault, "TPConfig (tp)", errors);
      const BlockReader tb(t, AutoRule::kMeansDefault);
      errors.step([&] { tb.integer("tp_grain_size"); });
      errors.step([&] {
        const int64_t size = tb.integer("tp_size").value_or(1);
        if (size != 1 && size != std::max<int64_t>(tp, 1)) {
          t.fail("tp_size", "is " + std::to_string(size) + " but autotp_size is " +
                                std::to_string(tp) + " (DeepSpeed raises: they must match)");
        }
      });
      for (const char* key : {"mpu", "tp_group"}) {
        errors.step([&] {
          if (tb.given(key) && !t.json()[key].is_null()) {
            t.fail(key, "is a Python object that a ds_config file cannot give; remove it");
          }
        });
      }
    });
  }
  if (tp > 1 && top.optional_integer("sequence_parallel_size").value_or(1) > 1) {
    errors.step([&] {
      r->fail("autotp_size", "not modelled: AutoTP together with Ulysses sequence parallelism "
                             "(sequence_parallel_size); remove one of them");
    });
  }
}

// LLaMA-Factory's ALST configs carry a "sequence_parallel" block that its launcher reads
// (extras/migration_utils.py) to set up DeepSpeed's UlyssesSPAttentionHF; zplan models the
// ds_config's own "sequence_parallel_size" (read_sequence_parallel) but not that launcher block.
void reject_sequence_parallel_block(const JsonReader& top) {
  std::optional<JsonReader> r = top_block(top, "sequence_parallel", Null::kMeansDefault);
  if (!r) return;
  if (r->optional_boolean("enabled").value_or(true)) {
    r->fail(
        "not modelled: sequence parallelism from the launcher's ALST/Ulysses block; give its "
        "size as the top-level \"sequence_parallel_size\" to plan Ulysses");
  }
}

}  // namespace

// Ulysses sequence parallelism (docs/cost_model.md "Ulysses sequence parallelism"): DeepSpeed
// reads a top-level "sequence_parallel_size" and divides the world by it for the batch keys
// (runtime/config.py DeepSpeedConfig.__init__: world_size = dist.get_world_size() /
// config["sequence_parallel_size"]); the sequence-parallel groups are consecutive ranks
// (runtime/sequence_parallel/parallel_state_sp.py initialize_sequence_parallel), so the size
// must divide the GPUs.
int read_sequence_parallel(const JsonReader& top, int world) {
  const int64_t sp = top.optional_integer("sequence_parallel_size").value_or(1);
  if (sp < 1) top.fail("sequence_parallel_size", "must be at least 1, got " + std::to_string(sp));
  if (world % sp != 0) {
    top.fail("sequence_parallel_size",
             "Ulysses sequence parallel size " + std::to_string(sp) + " does not divide the " +
                 std::to_string(world) + " GPUs (DeepSpeed groups consecutive ranks)");
  }
  return static_cast<int>(sp);
}

// AutoTP (docs/cost_model.md "AutoTP tensor parallelism"): the tensor-parallel groups are tp
// consecutive ranks (utils/groups.py _init_tp_mesh_device builds a (data, tensor) device mesh of
// the world), so autotp_size must divide the GPUs; 0 and 1 mean off, as the engine turns AutoTP
// on only above 1 (engine.py: if self.autotp_size() > 1).
int read_autotp_size(const JsonReader& top, int world) {
  std::optional<JsonReader> r = top_block(top, "tensor_parallel", Null::kRejected);
  if (!r) return 1;
  const int64_t tp = BlockReader(*r, AutoRule::kMeansDefault).integer("autotp_size").value_or(0);
  if (tp <= 1) return 1;
  if (world % tp != 0) {
    r->fail("autotp_size", "AutoTP size " + std::to_string(tp) + " does not divide the " +
                               std::to_string(world) + " GPUs (DeepSpeed's device mesh needs it)");
  }
  return static_cast<int>(tp);
}

// The engine reduces gradients in communication_data_type when it is given, else in the training
// precision (engine.py communication_data_type); zplan's collectives move the training
// precision's bytes, so another dtype is refused rather than ignored.
void reject_other_communication_dtype(const JsonReader& top, const DsConfig& c) {
  std::optional<std::string> v = top.optional_string("communication_data_type");
  if (!v || ascii_lower(*v) == precision_name(c.precision)) return;
  top.fail("communication_data_type", "not modelled: collectives in " + ascii_lower(*v) +
                                          " while training in " + precision_name(c.precision) +
                                          " (zplan sends gradients in the training " +
                                          "precision); remove it to plan that");
}

// Elastic training (runtime/config.py DeepSpeedConfig.__init__, elasticity/elasticity.py
// compute_elastic_config): with "elasticity": {"enabled": true} DeepSpeed picks the batch size and
// the micro-batch itself from the world size and replaces the file's batch keys (or raises
// ElasticityConfigError when they are given without ignore_non_elastic_batch_info).
void reject_elasticity(const JsonReader& top) {
  std::optional<JsonReader> r = top_block(top, "elasticity", Null::kMeansDefault);
  if (!r) return;
  if (r->optional_boolean("enabled").value_or(false)) {
    r->fail("enabled",
            "not modelled: elastic training (DeepSpeed chooses the batch size and micro-batch "
            "from the number of GPUs); remove it and give the batch keys to plan that run");
  }
}

// Every top-level key DeepSpeed 0.19.5 reads: DeepSpeedConfig._initialize_params
// (deepspeed/runtime/config.py) and the config classes it hands a block to, plus
// "sequence_parallel" (zplan's own refusal names it) and "allgather_size" (the deprecated boolean
// zero_optimization form reads it). DeepSpeed never looks at any other key.
constexpr std::string_view kDeepSpeedTopKeys[] = {
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
    "managed_gradient_accumulation", "steps_per_print", "dump_state", "disable_allgather",
    "communication_data_type", "seq_parallel_communication_data_type", "prescale_gradients",
    "gradient_predivide_factor", "sparse_gradients", "zero_optimization",
    "activation_checkpointing", "comms_logger", "tensorboard", "wandb", "csv_monitor", "comet",
    "gradient_clipping", "fp16", "bf16", "bfloat16", "amp", "torch_autocast",
    "compression_training", "graph_harvesting", "optimizer", "zero_allow_untested_optimizer",
    "zero_force_ds_cpu_optimizer", "scheduler", "flops_profiler", "wall_clock_breakdown",
    "memory_breakdown", "autotuning", "eigenvalue", "use_data_before_expert_parallelism",
    "hybrid_engine", "sparse_attention", "pipeline", "progressive_layer_drop",
    "curriculum_learning", "data_efficiency", "checkpoint", "data_types", "aio",
    "dataloader_drop_last", "log_level", "nebula", "datastates_ckpt", "weight_quantization",
    "compile", "timers", "tensor_parallel", "expert_parallel", "quantize_training", "elasticity",
    "sequence_parallel_size", "vocabulary_size", "sequence_parallel", "allgather_size"};

std::span<const std::string_view> deepspeed_top_keys() { return kDeepSpeedTopKeys; }

void note_unknown_top_keys(const nlohmann::json& document, const std::string& file,
                           std::vector<std::string>* notes) {
  if (notes == nullptr || !document.is_object()) return;
  for (const auto& item : document.items()) {
    const std::string& key = item.key();
    if (std::ranges::find(kDeepSpeedTopKeys, key) != std::end(kDeepSpeedTopKeys)) continue;
    notes->push_back(file + ": /" + key +
                     " is not a key DeepSpeed reads: ignored, as DeepSpeed ignores it" +
                     did_you_mean(key, kDeepSpeedTopKeys));
  }
}

// The checks on the top-level keys DsConfig keeps in DsConfig::other: what DeepSpeed validates
// or zplan refuses there. `top` is the whole file when reading, DsConfig::other when validating
// a config built in code.
void check_unmodeled_top_keys(const JsonReader& top, Errors& errors) {
  errors.step([&] { check_communication_data_type(top); });
  errors.step([&] { read_compile(top, errors); });
  errors.step([&] { reject_apex_amp(top); });
  errors.step([&] { check_tensor_parallel_block(top, errors); });
  errors.step([&] { reject_sequence_parallel_block(top); });
  errors.step([&] { reject_elasticity(top); });
  reject_unmodeled_training_features(top, errors);
}

}  // namespace zplan::sim::internal
