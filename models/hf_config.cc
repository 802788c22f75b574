// Hugging Face config.json -> ModelShape, for model_type llama, mistral, qwen2, gpt_neox, gpt2
// and opt.
//
// The keys that size the network (layers, hidden, heads, vocabulary, MLP width) are required:
// every config.json on the Hub has them, and falling back to the config class's default (a 7B
// model) would plan for a model the user does not have. Every other key takes the default of the
// transformers config class, as from_pretrained would (docs/models.md has the table). Keys that
// do not change parameters or activations (rope settings, token ids, eps, ...) are ignored.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "models/catalog.h"
#include "base/input_error.h"
#include "base/json_reader.h"
#include "models/model_internal.h"

namespace zplan::models {

namespace {

using internal::family_defaults;
using internal::kMaxLayers;
using internal::kMaxVocab;
using internal::kMaxWidth;

constexpr const char* kSupported = "llama, mistral, qwen2, gpt_neox, gpt2, opt";

// Planning default for the sequence length: the model's context, capped where long-context
// models would otherwise plan for 32K-128K tokens per sequence by default.
constexpr int64_t kMaxDefaultSeqLen = 8192;

int64_t dim(const JsonReader& r, const char* key, int64_t max) {
  int64_t v = r.positive_integer(key);
  if (v > max) r.fail(key, "must be at most " + std::to_string(max) + ", got " + std::to_string(v));
  return v;
}

int64_t optional_dim(const JsonReader& r, const char* key, int64_t fallback, int64_t max) {
  return r.has(key) ? dim(r, key, max) : fallback;
}

bool flag(const JsonReader& r, const char* key, bool fallback) {
  return r.optional_boolean(key).value_or(fallback);
}

// A dropout probability; true when it is > 0.
bool dropout_on(const JsonReader& r, const char* key, double fallback) {
  std::optional<double> p = r.optional_number(key);
  if (p && (*p < 0 || *p >= 1)) {
    r.fail(key, "must be a probability in [0, 1), got " + describe_json_value(r.json().at(key)));
  }
  return p.value_or(fallback) > 0;
}

// GeLU-like activations keep their input for backward, ReLU keeps its output (activations.cc).
Activation activation_from(const JsonReader& r, const char* key, const char* fallback) {
  std::string name = r.optional_string(key).value_or(fallback);
  return name.find("relu") != std::string::npos ? Activation::kRelu : Activation::kGelu;
}

void check_heads_divide(const JsonReader& r, const char* heads_key, int64_t heads,
                        const char* hidden_key, int64_t hidden) {
  if (hidden % heads != 0) {
    r.fail(heads_key, "must divide " + std::string(hidden_key) + " (" + std::to_string(hidden) +
                          "), got " + std::to_string(heads));
  }
}

void set_seq_len(ModelShape& s, int64_t context) {
  s.default_seq_len = std::min(context, kMaxDefaultSeqLen);
}

// LlamaConfig, MistralConfig, Qwen2Config. num_key_value_heads: absent -> the class default
// (llama: None, mistral: 8, qwen2: 32), null -> num_attention_heads. head_dim: absent or null ->
// hidden_size / num_attention_heads. Tied embeddings default false for all three.
ModelShape llama_like(const JsonReader& r, const std::string& type) {
  ModelShape s = family_defaults(Family::kLlama);
  s.layers = dim(r, "num_hidden_layers", kMaxLayers);
  s.hidden = dim(r, "hidden_size", kMaxWidth);
  s.heads = dim(r, "num_attention_heads", kMaxWidth);
  s.ffn = dim(r, "intermediate_size", kMaxWidth);
  s.vocab = dim(r, "vocab_size", kMaxVocab);
  if (r.has("head_dim")) {
    s.head_dim = dim(r, "head_dim", kMaxWidth);
  } else {
    check_heads_divide(r, "num_attention_heads", s.heads, "hidden_size", s.hidden);
  }
  int64_t kv_default = s.heads;
  if (!r.json().contains("num_key_value_heads")) {
    if (type == "mistral") kv_default = 8;
    if (type == "qwen2") kv_default = 32;
  }
  s.kv_heads = optional_dim(r, "num_key_value_heads", kv_default, kMaxWidth);
  if (s.heads % s.kv_heads != 0) {
    if (r.has("num_key_value_heads")) {
      r.fail("num_key_value_heads", "must divide num_attention_heads (" +
                                        std::to_string(s.heads) + "), got " +
                                        std::to_string(s.kv_heads));
    }
    r.fail("num_attention_heads",
           "num_key_value_heads is absent and defaults to " + std::to_string(s.kv_heads) +
               " for " + type + ", which does not divide " + std::to_string(s.heads));
  }
  s.tied_embeddings = flag(r, "tie_word_embeddings", false);
  if (type == "qwen2") {
    s.qkv_bias = true;  // Qwen2Attention: q, k, v with bias, o_proj without
  } else if (type == "llama") {
    bool attention_bias = flag(r, "attention_bias", false);  // q, k, v and o_proj
    s.qkv_bias = attention_bias;
    s.attn_out_bias = attention_bias;
    s.mlp_bias = flag(r, "mlp_bias", false);
  }
  // Llama-family blocks have no hidden dropout; `dropout` carries attention_dropout.
  s.dropout = dropout_on(r, "attention_dropout", 0.0);
  s.attention_dropout = true;
  int64_t context_default = type == "llama" ? 2048 : type == "mistral" ? 4096 * 32 : 32768;
  set_seq_len(s, optional_dim(r, "max_position_embeddings", context_default, kMaxVocab));
  return s;
}

// GPTNeoXConfig: rotary (no position table), untied, parallel residual by default; attention_bias
// (default true) covers query_key_value and dense, the MLP always has biases.
ModelShape gpt_neox(const JsonReader& r) {
  ModelShape s = family_defaults(Family::kNeox);
  s.layers = dim(r, "num_hidden_layers", kMaxLayers);
  s.hidden = dim(r, "hidden_size", kMaxWidth);
  s.heads = dim(r, "num_attention_heads", kMaxWidth);
  s.ffn = dim(r, "intermediate_size", kMaxWidth);
  s.vocab = dim(r, "vocab_size", kMaxVocab);
  check_heads_divide(r, "num_attention_heads", s.heads, "hidden_size", s.hidden);
  s.tied_embeddings = flag(r, "tie_word_embeddings", false);
  s.parallel_residual = flag(r, "use_parallel_residual", true);
  bool attention_bias = flag(r, "attention_bias", true);
  s.linear_bias = attention_bias;
  s.mlp_bias = true;
  bool hidden_dropout = dropout_on(r, "hidden_dropout", 0.0);
  s.attention_dropout = dropout_on(r, "attention_dropout", 0.0);
  s.dropout = hidden_dropout || s.attention_dropout;
  s.activation = activation_from(r, "hidden_act", "gelu");
  set_seq_len(s, optional_dim(r, "max_position_embeddings", 2048, kMaxVocab));
  return s;
}

// GPT2Config: n_embd/n_layer/n_head, n_positions learned positions (default 1024), n_inner null
// -> 4 * n_embd, Conv1D weights (same counts as Linear), tied embeddings by default.
ModelShape gpt2(const JsonReader& r) {
  ModelShape s = family_defaults(Family::kGpt);
  s.layers = dim(r, "n_layer", kMaxLayers);
  s.hidden = dim(r, "n_embd", kMaxWidth);
  s.heads = dim(r, "n_head", kMaxWidth);
  s.vocab = dim(r, "vocab_size", kMaxVocab);
  check_heads_divide(r, "n_head", s.heads, "n_embd", s.hidden);
  s.ffn = optional_dim(r, "n_inner", 4 * s.hidden, kMaxWidth);
  s.max_positions = optional_dim(r, "n_positions", 1024, kMaxVocab);
  s.tied_embeddings = flag(r, "tie_word_embeddings", true);
  s.attention_dropout = dropout_on(r, "attn_pdrop", 0.1);
  bool resid_dropout = dropout_on(r, "resid_pdrop", 0.1);
  bool embed_dropout = dropout_on(r, "embd_pdrop", 0.1);
  s.dropout = resid_dropout || embed_dropout || s.attention_dropout;
  s.activation = activation_from(r, "activation_function", "gelu_new");
  set_seq_len(s, s.max_positions);
  return s;
}

// OPTConfig: ffn_dim, learned positions with 2 extra rows (OPTLearnedPositionalEmbedding's
// offset), ReLU, enable_bias (default true) on every Linear, word_embed_proj_dim (default
// hidden_size; when different, project_in / project_out without bias), the final layer norm only
// with do_layer_norm_before and not _remove_final_layer_norm, tied embeddings by default.
ModelShape opt(const JsonReader& r) {
  ModelShape s = family_defaults(Family::kOpt);
  s.layers = dim(r, "num_hidden_layers", kMaxLayers);
  s.hidden = dim(r, "hidden_size", kMaxWidth);
  s.heads = dim(r, "num_attention_heads", kMaxWidth);
  s.ffn = dim(r, "ffn_dim", kMaxWidth);
  s.vocab = dim(r, "vocab_size", kMaxVocab);
  check_heads_divide(r, "num_attention_heads", s.heads, "hidden_size", s.hidden);
  int64_t positions = optional_dim(r, "max_position_embeddings", 2048, kMaxVocab - 2);
  s.max_positions = positions + 2;
  int64_t proj = optional_dim(r, "word_embed_proj_dim", s.hidden, kMaxWidth);
  s.embed_proj_dim = proj == s.hidden ? 0 : proj;
  s.linear_bias = flag(r, "enable_bias", true);
  if (!flag(r, "layer_norm_elementwise_affine", true)) {
    r.fail("layer_norm_elementwise_affine",
           "false (layer norms without parameters) is not supported");
  }
  s.pre_norm = flag(r, "do_layer_norm_before", true);
  s.final_norm = s.pre_norm && !flag(r, "_remove_final_layer_norm", false);
  s.tied_embeddings = flag(r, "tie_word_embeddings", true);
  s.attention_dropout = dropout_on(r, "attention_dropout", 0.0);
  s.dropout = dropout_on(r, "dropout", 0.1) || s.attention_dropout;
  s.activation = activation_from(r, "activation_function", "relu");
  set_seq_len(s, positions);
  return s;
}

// The last component of "_name_or_path" when the config records one ("facebook/opt-350m" ->
// "opt-350m"), else the file's name.
std::string model_name(const JsonReader& r, const std::string& file) {
  std::string recorded = r.optional_string("_name_or_path").value_or("");
  while (!recorded.empty() && recorded.back() == '/') recorded.pop_back();
  size_t slash = recorded.find_last_of('/');
  std::string last = slash == std::string::npos ? recorded : recorded.substr(slash + 1);
  if (!last.empty() && last != "." && last != "..") return last;
  return internal::model_name_from_path(file);
}

}  // namespace

Model model_from_hf_config(const nlohmann::json& config, const std::string& file) {
  JsonReader r(config, file);
  if (!config.is_object()) r.fail("must be a JSON object, got " + describe_json_value(config));
  std::string type = r.string("model_type");
  ModelShape shape;
  if (type == "llama" || type == "mistral" || type == "qwen2") {
    shape = llama_like(r, type);
  } else if (type == "gpt_neox") {
    shape = gpt_neox(r);
  } else if (type == "gpt2") {
    shape = gpt2(r);
  } else if (type == "opt") {
    shape = opt(r);
  } else {
    r.fail("model_type",
           "unsupported model_type \"" + type + "\"; supported: " + std::string(kSupported));
  }
  shape.name = model_name(r, file);
  return build_model(shape, file);
}

}  // namespace zplan::models
