// The top-level ds_config blocks that change the training job itself -- what runs, on which
// tokens, in which precision -- rather than how ZeRO stores and moves it: the hybrid engine,
// torch autocast, progressive layer drop, data efficiency (random-LTD, curriculum, dynamic
// batching), legacy curriculum learning, AutoEP's expert parallelism and the pipeline engine's
// block. zplan models none of
// them, so an enabled one is refused as "not modelled: <feature>" (or with DeepSpeed's own reason
// where DeepSpeed refuses it first); a disabled one is accepted and kept for writing back.
// Sources: deepspeed/runtime/config.py, engine.py, data_pipeline/config.py, torch_autocast.py and
// module_inject/auto_ep_config.py at v0.19.5.
#include <optional>
#include <string>
#include <string_view>

#include "base/input_error.h"
#include "base/json_reader.h"
#include "sim/ds_config/zero_config_internal.h"

namespace zplan::sim::internal {

namespace {

using nlohmann::json;

// The plain-dict block `block`'s `key` switches its feature on. nullopt when absent or false; else
// a remark for the message when the value is not a JSON boolean ("enabled": "false" is a
// non-empty string, which DeepSpeed takes as true).
std::optional<std::string> truthy_member(const JsonReader& block, const char* key) {
  auto it = block.json().find(key);
  if (it == block.json().end() || !python_truthy(*it)) return std::nullopt;
  if (it->is_boolean()) return std::string();
  return " (" + describe_json_value(*it) +
         " is true to DeepSpeed, which tests the value as Python does)";
}

// An object member of a plain-dict block, when it is one (DeepSpeed reads it with dict.get).
std::optional<JsonReader> sub_block(const JsonReader& block, const char* key) {
  auto it = block.json().find(key);
  if (it == block.json().end() || !it->is_object()) return std::nullopt;
  return block.child(key);
}

// hybrid_engine (HybridEngineConfig, a pydantic model in runtime/config.py): enabled makes
// deepspeed.initialize return DeepSpeedHybridEngine (engine.py), DeepSpeed-Chat's RLHF actor that
// switches between training and generation with inference kernels and its own weight layouts.
constexpr std::string_view kHybridEngineKeys[] = {"enabled",
                                                  "max_out_tokens",
                                                  "inference_tp_size",
                                                  "release_inference_cache",
                                                  "pin_parameters",
                                                  "tp_gather_partition_size"};

void reject_hybrid_engine(const JsonReader& top, Errors& errors) {
  reject_pydantic_switch(top, "hybrid_engine", kHybridEngineKeys,
                         "HybridEngineConfig (hybrid_engine)", "enabled",
                         "not modelled: DeepSpeed's hybrid engine (DeepSpeed-Chat's RLHF actor, "
                         "which generates with inference kernels between training steps); "
                         "remove it to plan the training step alone",
                         errors);
}

// torch_autocast (config.py get_torch_autocast_enabled, a plain dict): the engine keeps the
// parameters in their own dtype and runs torch.autocast, casting the gradients of the
// lower-precision-safe modules for communication (torch_autocast.py init_autocast_params), a
// mixed precision unlike fp16/bf16 whose memory zplan models. init_autocast_params first asserts
// that ZeRO++'s quantized weights are off.
void reject_torch_autocast(const JsonReader& top) {
  std::optional<JsonReader> r = top_block(top, "torch_autocast", Null::kRejected);
  if (!r) return;
  std::optional<std::string> on = truthy_member(*r, "enabled");
  if (!on) return;
  auto z = top.json().find("zero_optimization");
  if (z != top.json().end() && z->is_object()) {
    const JsonReader zr = top.child("zero_optimization");
    const BlockReader zb(zr, AutoRule::kMeansDefault);
    std::optional<bool> qw;
    try {
      qw = zb.boolean("zero_quantized_weights");
    } catch (const InputError&) {
      // Reported where zero_optimization is read.
    }
    if (qw.value_or(false)) {
      r->fail("enabled", "Cannot enable both torch autocast and zero quantized weights "
                         "(DeepSpeed asserts it, torch_autocast.py _validate_auto_cast_settings)" +
                             *on);
    }
  }
  r->fail("enabled",
          "not modelled: torch autocast mixed precision (parameters kept in their own dtype, "
          "autocast compute, gradients cast per module for communication)" + *on +
          "; use \"bf16\" or \"fp16\" to plan DeepSpeed's own mixed precision");
}

// progressive_layer_drop (get_pld_enabled, a plain dict): the engine passes a keep probability
// theta to the model's forward, which skips layers on a schedule (engine.py
// _configure_progressive_layer_drop): less compute and activation memory than the full model.
void reject_progressive_layer_drop(const JsonReader& top) {
  std::optional<JsonReader> r = top_block(top, "progressive_layer_drop", Null::kRejected);
  if (!r) return;
  if (std::optional<std::string> on = truthy_member(*r, "enabled")) {
    r->fail("enabled", "not modelled: progressive layer drop (layers skipped on a schedule)" +
                           *on + "; remove it to plan every layer running");
  }
}

// data_efficiency (data_pipeline/config.py): random-LTD (data_routing.random_ltd.enabled, read
// whatever the enclosing "enabled" flags say: engine.py random_ltd_enabled) drops tokens inside
// the middle layers; the data sampler's curriculum_learning and dynamic_batching change the
// sequences and batches each step trains on.
void reject_data_efficiency(const JsonReader& top, Errors& errors) {
  std::optional<JsonReader> r = top_block(top, "data_efficiency", Null::kRejected);
  if (!r) return;
  if (std::optional<JsonReader> routing = sub_block(*r, "data_routing")) {
    if (std::optional<JsonReader> ltd = sub_block(*routing, "random_ltd")) {
      if (std::optional<std::string> on = truthy_member(*ltd, "enabled")) {
        errors.step([&] {
          ltd->fail("enabled", "not modelled: random-LTD (tokens dropped inside the middle "
                               "layers)" + *on + "; remove it to plan full-length layers");
        });
      }
    }
  }
  std::optional<JsonReader> sampling = sub_block(*r, "data_sampling");
  if (!sampling) return;
  if (std::optional<JsonReader> cl = sub_block(*sampling, "curriculum_learning")) {
    if (std::optional<std::string> on = truthy_member(*cl, "enabled")) {
      errors.step([&] {
        // get_curriculum_learning asserts it first.
        if (!cl->has("curriculum_metrics")) {
          cl->fail("enabled", "Curriculum learning is enabled, curriculum_metrics must be "
                              "specified (DeepSpeed asserts it, data_pipeline/config.py)");
        }
        cl->fail("enabled", "not modelled: curriculum learning (each step trains on data of a "
                            "scheduled difficulty, such as shorter sequences)" + *on +
                                "; remove it to plan the full sequence length");
      });
    }
  }
  if (std::optional<JsonReader> db = sub_block(*sampling, "dynamic_batching")) {
    // get_dynamic_batching reads it with bool(...), Python's truth value too.
    if (std::optional<std::string> on = truthy_member(*db, "enabled")) {
      errors.step([&] {
        db->fail("enabled", "not modelled: dynamic batching (micro-batches packed to a token "
                            "budget, so the batch size varies)" + *on +
                                "; remove it to plan fixed micro-batches");
      });
    }
  }
}

// The legacy top-level curriculum_learning (get_curriculum_enabled_legacy): the engine passes
// curriculum_seqlen to the model's forward (engine.py forward), which trains on truncated
// sequences early on.
void reject_legacy_curriculum(const JsonReader& top) {
  std::optional<JsonReader> r = top_block(top, "curriculum_learning", Null::kRejected);
  if (!r) return;
  if (std::optional<std::string> on = truthy_member(*r, "enabled")) {
    r->fail("enabled", "not modelled: curriculum learning (the sequence length or difficulty "
                       "grows on a schedule)" + *on + "; remove it to plan the full sequence "
                       "length");
  }
}

// expert_parallel (get_expert_parallel_config -> auto_ep_config.py parse_autoep_config, a plain
// dict; null or {} is the default, off): with "enabled" the engine's _configure_expert_parallel
// replaces each MoE block by an AutoEP layer whose ranks of an autoep_size group each hold
// experts / autoep_size of its routed experts and exchange the routed tokens by all-to-all. zplan
// plans every rank holding every expert (ZeRO partitions them like any parameter), so the memory
// and the communication of an expert-parallel run are not what it would predict.
void reject_expert_parallel(const JsonReader& top) {
  std::optional<JsonReader> r = top_block(top, "expert_parallel", Null::kMeansDefault);
  if (!r) return;
  if (std::optional<std::string> on = truthy_member(*r, "enabled")) {
    r->fail("enabled", "not modelled: AutoEP expert parallelism (each rank of an autoep_size "
                       "group holds its share of the experts and the tokens travel by "
                       "all-to-all)" + *on + "; remove it to plan the experts held on every rank "
                       "and partitioned by ZeRO");
  }
}

// pipeline (get_pipeline_config): read only by PipelineEngine (runtime/pipe/engine.py), which
// deepspeed.initialize builds when the model is a PipelineModule: pipeline parallelism (layers
// split into stages, micro-batches in flight, ZeRO stage 1 at most), which zplan does not model.
// The block has no "enabled": its presence is the statement of a pipelined model.
void reject_pipeline(const JsonReader& top) {
  if (!top_block(top, "pipeline", Null::kRejected)) return;
  top.fail("pipeline",
           "not modelled: pipeline parallelism (DeepSpeed's PipelineEngine reads this block for "
           "a PipelineModule model); remove it if the model is not a PipelineModule, to plan "
           "data parallelism");
}

}  // namespace

void reject_pydantic_switch(const JsonReader& top, const char* block,
                            std::span<const std::string_view> keys, std::string_view class_name,
                            const char* flag, const std::string& problem, Errors& errors) {
  std::optional<JsonReader> r = top_block(top, block, Null::kRejected);
  if (!r) return;
  reject_unknown_keys(*r, keys, AutoRule::kMeansDefault, class_name, errors);
  if (BlockReader(*r, AutoRule::kMeansDefault).boolean(flag).value_or(false)) {
    r->fail(flag, problem);
  }
}

void reject_unmodeled_training_features(const JsonReader& top, Errors& errors) {
  errors.step([&] { reject_hybrid_engine(top, errors); });
  errors.step([&] { reject_torch_autocast(top); });
  errors.step([&] { reject_progressive_layer_drop(top); });
  errors.step([&] { reject_data_efficiency(top, errors); });
  errors.step([&] { reject_legacy_curriculum(top); });
  errors.step([&] { reject_expert_parallel(top); });
  errors.step([&] { reject_pipeline(top); });
}

}  // namespace zplan::sim::internal
