// The top-level ds_config keys that DsConfig keeps whole in DsConfig::other, and what DeepSpeed
// 0.19 checks in them or zplan refuses there (deepspeed/runtime/config.py and the config classes
// each comment names): communication_data_type, compile, amp, tensor_parallel, the sequence
// parallel keys and elasticity. zero_config.cc calls check_unmodeled_top_keys for a file and for a config built
// in code alike. Sources: reference/deepspeed_internals.md §1.
#include <optional>
#include <string>
#include <string_view>

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

// tensor_parallel (TPTrainingConfig, deepspeed/runtime/tensor_parallel/config.py): autotp_size > 1
// turns on AutoTP training (engine.py _configure_tensor_parallel): each layer's weights split
// over that many GPUs and a data-parallel group that much smaller. 0 or 1 leaves it off.
void reject_autotp(const JsonReader& top) {
  std::optional<JsonReader> r = top_block(top, "tensor_parallel", Null::kRejected);
  if (!r) return;
  const int64_t tp = BlockReader(*r, AutoRule::kMeansDefault).integer("autotp_size").value_or(0);
  if (tp > 1) {
    r->fail("autotp_size", "not modelled: AutoTP tensor parallelism (" + std::to_string(tp) +
                               " GPUs share each layer's weights, and the data-parallel group is " +
                               std::to_string(tp) +
                               " times smaller); remove it to plan plain ZeRO data parallelism");
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

// The checks on the top-level keys DsConfig keeps in DsConfig::other: what DeepSpeed validates
// or zplan refuses there. `top` is the whole file when reading, DsConfig::other when validating
// a config built in code.
void check_unmodeled_top_keys(const JsonReader& top, Errors& errors) {
  errors.step([&] { check_communication_data_type(top); });
  errors.step([&] { read_compile(top, errors); });
  errors.step([&] { reject_apex_amp(top); });
  errors.step([&] { reject_autotp(top); });
  errors.step([&] { reject_sequence_parallel_block(top); });
  errors.step([&] { reject_elasticity(top); });
  reject_unmodeled_training_features(top, errors);
}

}  // namespace zplan::sim::internal
