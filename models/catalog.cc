// load_model and zplan's own model files. The format (docs/models.md): one JSON object with the
// fields of ModelShape by name; "family" picks the defaults of every flag not given.
#include "models/catalog.h"

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "base/atomic_file.h"
#include "base/input_error.h"
#include "base/json_reader.h"
#include "models/model_internal.h"

namespace zplan::models {

namespace internal {

std::string model_name_from_path(const std::string& path) {
  std::string base = path;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  std::string dir;
  size_t slash = base.find_last_of('/');
  if (slash != std::string::npos) {
    dir = base.substr(0, slash);
    base = base.substr(slash + 1);
  }
  size_t dot = base.find_last_of('.');
  std::string stem = dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
  if (stem == "config" && !dir.empty()) {
    size_t parent = dir.find_last_of('/');
    std::string dir_name = parent == std::string::npos ? dir : dir.substr(parent + 1);
    if (!dir_name.empty() && dir_name != "." && dir_name != "..") return dir_name;
  }
  return stem;
}

}  // namespace internal

namespace {

using internal::family_defaults;

std::string preset_list() {
  std::string out;
  for (const std::string& name : preset_names()) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

bool looks_like_path(const std::string& spec) {
  return spec.find('/') != std::string::npos || spec.find('\\') != std::string::npos ||
         (spec.size() > 5 && spec.compare(spec.size() - 5, 5, ".json") == 0);
}

Norm parse_norm(const JsonReader& r) {
  std::string text = r.string("norm");
  if (text == norm_name(Norm::kLayerNorm)) return Norm::kLayerNorm;
  if (text == norm_name(Norm::kRmsNorm)) return Norm::kRmsNorm;
  r.fail("norm", "must be \"layernorm\" or \"rmsnorm\", got \"" + text + "\"");
}

Activation parse_activation(const JsonReader& r) {
  std::string text = r.string("activation");
  for (Activation a : {Activation::kGelu, Activation::kRelu, Activation::kSwiglu}) {
    if (text == activation_name(a)) return a;
  }
  r.fail("activation", "must be \"gelu\", \"relu\" or \"swiglu\", got \"" + text + "\"");
}

QkNorm parse_qk_norm(const JsonReader& r) {
  std::string text = r.string("qk_norm");
  if (text == "none") return QkNorm::kNone;
  if (text == "per_head") return QkNorm::kPerHead;
  if (text == "full") return QkNorm::kFull;
  r.fail("qk_norm", "must be \"none\", \"per_head\" or \"full\", got \"" + text + "\"");
}

void read_int(const JsonReader& r, const char* key, int64_t* field) {
  if (r.has(key)) *field = r.integer(key);
}

void read_bool(const JsonReader& r, const char* key, bool* field) {
  if (r.has(key)) *field = r.boolean(key);
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const internal::Preset& p : internal::presets()) names.push_back(p.shape.name);
  return names;
}

std::string preset_description(const std::string& name) {
  const internal::Preset* p = internal::find_preset(name);
  return p == nullptr ? std::string() : p->description;
}

Model model_from_zplan_json(const nlohmann::json& spec, const std::string& file,
                            int transformers_major) {
  JsonReader r(spec, file);
  if (!spec.is_object()) r.fail("must be a JSON object, got " + describe_json_value(spec));
  std::string family_text = r.string("family");
  std::optional<Family> family = internal::family_from_name(family_text);
  if (!family) {
    r.fail("family",
           "must be one of gpt, opt, neox, llama, gptj, falcon, mlp; got \"" + family_text +
               "\"");
  }
  ModelShape s = family_defaults(*family);
  s.name = r.optional_string("name").value_or(internal::model_name_from_path(file));
  if (*family == Family::kMlp) {
    for (const auto& [key, value] : spec.items()) {
      if (key != "family" && key != "name" && key != "layers" && key != "hidden" &&
          key != "default_seq_len") {
        r.fail(key, "not used by the mlp family (it takes layers, hidden, default_seq_len)");
      }
    }
    s.layers = r.integer("layers");
    s.hidden = r.integer("hidden");
    read_int(r, "default_seq_len", &s.default_seq_len);
    return build_model(s, file);
  }

  r.reject_unknown_keys({"family", "name", "layers", "hidden", "heads", "kv_heads", "head_dim",
                         "ffn", "vocab", "max_positions", "tied_embeddings", "linear_bias",
                         "qkv_bias", "attn_out_bias", "mlp_bias", "dropout", "attention_dropout",
                         "parallel_residual", "pre_norm", "final_norm", "norm", "activation",
                         "embed_proj_dim", "default_seq_len", "qk_norm", "post_sublayer_norm",
                         "parallel_norms", "lm_head_bias", "fused_qkv", "fused_gate_up",
                         "experts", "experts_per_token", "expert_ffn", "shared_expert_ffn",
                         "shared_expert_gate", "dense_layers", "moe_block_class",
                         "moe_block_name", "fused_experts", "q_lora_rank", "kv_lora_rank",
                         "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"});
  s.layers = r.integer("layers");
  s.hidden = r.integer("hidden");
  s.heads = r.integer("heads");
  s.ffn = r.integer("ffn");
  s.vocab = r.integer("vocab");
  // Learned positions define the GPT and OPT families; a missing table would silently drop
  // P*h parameters, so those two must say how many rows theirs has.
  if (*family == Family::kGpt || *family == Family::kOpt) {
    s.max_positions = r.integer("max_positions");
  } else {
    read_int(r, "max_positions", &s.max_positions);
  }
  read_int(r, "kv_heads", &s.kv_heads);
  read_int(r, "head_dim", &s.head_dim);
  read_int(r, "embed_proj_dim", &s.embed_proj_dim);
  read_int(r, "default_seq_len", &s.default_seq_len);
  read_bool(r, "tied_embeddings", &s.tied_embeddings);
  read_bool(r, "linear_bias", &s.linear_bias);
  read_bool(r, "qkv_bias", &s.qkv_bias);
  read_bool(r, "attn_out_bias", &s.attn_out_bias);
  read_bool(r, "mlp_bias", &s.mlp_bias);
  read_bool(r, "dropout", &s.dropout);
  read_bool(r, "attention_dropout", &s.attention_dropout);
  read_bool(r, "parallel_residual", &s.parallel_residual);
  read_bool(r, "pre_norm", &s.pre_norm);
  read_bool(r, "final_norm", &s.final_norm);
  if (r.has("norm")) s.norm = parse_norm(r);
  if (r.has("activation")) s.activation = parse_activation(r);
  if (r.has("qk_norm")) s.qk_norm = parse_qk_norm(r);
  read_bool(r, "post_sublayer_norm", &s.post_sublayer_norm);
  read_int(r, "parallel_norms", &s.parallel_norms);
  read_bool(r, "lm_head_bias", &s.lm_head_bias);
  read_bool(r, "fused_qkv", &s.fused_qkv);
  read_bool(r, "fused_gate_up", &s.fused_gate_up);
  read_int(r, "experts", &s.experts);
  read_int(r, "experts_per_token", &s.experts_per_token);
  read_int(r, "expert_ffn", &s.expert_ffn);
  read_int(r, "shared_expert_ffn", &s.shared_expert_ffn);
  read_bool(r, "shared_expert_gate", &s.shared_expert_gate);
  read_int(r, "dense_layers", &s.dense_layers);
  if (r.has("moe_block_class")) s.moe_block_class = r.string("moe_block_class");
  if (r.has("moe_block_name")) s.moe_block_name = r.string("moe_block_name");
  // Without the key, the experts take the layout of the transformers release (--transformers).
  s.fused_experts = s.experts > 0 && transformers_major >= 5;
  read_bool(r, "fused_experts", &s.fused_experts);
  // A TopKRouter module in transformers 5's layout (ModelShape::router_linear).
  s.router_linear = !s.fused_experts;
  read_int(r, "q_lora_rank", &s.q_lora_rank);
  read_int(r, "kv_lora_rank", &s.kv_lora_rank);
  read_int(r, "qk_nope_head_dim", &s.qk_nope_head_dim);
  read_int(r, "qk_rope_head_dim", &s.qk_rope_head_dim);
  read_int(r, "v_head_dim", &s.v_head_dim);
  return build_model(s, file);
}

namespace {

// A model file: a Hugging Face config.json or a zplan model file.
Model load_model_file(const std::string& spec, int transformers_major) {
  nlohmann::json doc = load_json_file(spec);
  if (!doc.is_object()) {
    throw InputError(spec, "must be a JSON object (a Hugging Face config.json or a zplan model "
                           "file), got " + describe_json_value(doc));
  }
  if (doc.contains("model_type")) return model_from_hf_config(doc, spec, transformers_major);
  if (doc.contains("family")) return model_from_zplan_json(doc, spec, transformers_major);
  throw InputError(spec,
                   "neither a Hugging Face config.json (no \"model_type\") nor a zplan model "
                   "file (no \"family\")");
}

}  // namespace

Model load_model(const std::string& spec, int transformers_major) {
  if (spec.empty()) {
    throw InputError("--model", "is empty; presets: " + preset_list() +
                                    ", or give a path to a config.json");
  }
  if (const internal::Preset* preset = internal::find_preset(spec)) {
    return build_model(preset->shape, "preset " + preset->shape.name);
  }
  if (!path_exists(spec)) {
    if (looks_like_path(spec)) {
      throw InputError("--model", "no such file '" + spec + "' (and no preset has that name)");
    }
    throw InputError("--model", "unknown model '" + spec + "'; presets: " + preset_list() +
                                    ", or give a path to a config.json");
  }
  const std::string file = model_file_of(spec);
  if (file != spec && !path_exists(file)) {
    throw InputError(spec, "is a directory without a config.json (a Hugging Face model "
                           "folder holds one); give the config file or a preset");
  }
  return load_model_file(file, transformers_major);
}

// A Hugging Face model folder (a download, or the Hub's snapshot layout) stands for its
// config.json, as from_pretrained reads it.
std::string model_file_of(const std::string& spec) {
  std::error_code ec;
  if (!std::filesystem::is_directory(spec, ec)) return spec;
  return (std::filesystem::path(spec) / "config.json").string();
}

}  // namespace zplan::models
