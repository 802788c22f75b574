// Hugging Face config.json -> ModelShape, for model_type llama, mistral, qwen2, gpt_neox, gpt2,
// opt, and the general decoder's types (qwen3, gemma, gemma2, gemma3_text, phi3, olmo2, olmo3, granite,
// smollm3, ernie4_5, seed_oss, glm4, exaone4, mixtral, qwen2_moe, qwen3_moe, olmoe, glm4_moe,
// llama4_text, deepseek_v2, deepseek_v3, gpt_oss), gptj and falcon; and qwen (Qwen v1's remote
// code, hf_remote_code.cc).
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
#include <vector>

#include "models/catalog.h"
#include "base/input_error.h"
#include "base/json_reader.h"
#include "models/hf_reader.h"
#include "models/model_internal.h"

namespace zplan::models {

namespace internal {

int64_t dim(const JsonReader& r, const char* key, int64_t max) {
  // Python's json reads 32.0 as a float, and the modeling code sizes range() and nn.Linear with
  // it, which refuse one (TypeError): only a JSON integer builds the model.
  if (r.has(key) && r.json().at(key).is_number_float()) {
    r.fail(key, "must be an integer, got " + describe_json_value(r.json().at(key)) +
                    " (transformers builds range() and nn.Linear from it, which refuse a float)");
  }
  int64_t v = r.positive_integer(key);
  if (v > max) r.fail(key, "must be at most " + std::to_string(max) + ", got " + std::to_string(v));
  return v;
}

int64_t optional_dim(const JsonReader& r, const char* key, int64_t fallback, int64_t max) {
  return r.has(key) ? dim(r, key, max) : fallback;
}

void refuse_null(const JsonReader& r, const char* key, int64_t fallback) {
  if (r.is_null(key)) {
    r.fail(key, "null: transformers cannot build the model with None here; give a number, or "
                "leave the key out for the default (" + std::to_string(fallback) + ")");
  }
}

int64_t sized_dim(const JsonReader& r, const char* key, int64_t fallback, int64_t max) {
  refuse_null(r, key, fallback);
  return optional_dim(r, key, fallback, max);
}

int64_t sized_count(const JsonReader& r, const char* key, int64_t fallback) {
  refuse_null(r, key, fallback);
  return r.has(key) ? r.non_negative_integer(key) : fallback;
}

bool flag(const JsonReader& r, const char* key, bool fallback) {
  return r.optional_boolean(key).value_or(fallback);
}

void refuse_if(const JsonReader& r, const char* key, bool unsupported, const std::string& why) {
  if (r.has(key) && unsupported) r.fail(key, why);
}

void require_empty_list(const JsonReader& r, const char* key, const std::string& why) {
  if (!r.has(key)) return;
  const nlohmann::json& v = r.json().at(key);
  if (!v.is_array()) r.fail(key, "must be a list, got " + describe_json_value(v));
  if (!v.empty()) r.fail(key, why);
}

constexpr int64_t kMaxDefaultSeqLen = 8192;

bool dropout_on(const JsonReader& r, const char* key, double fallback) {
  std::optional<double> p = r.optional_number(key);
  if (p && (*p < 0 || *p >= 1)) {
    r.fail(key, "must be a probability in [0, 1), got " + describe_json_value(r.json().at(key)));
  }
  return p.value_or(fallback) > 0;
}

void set_seq_len(ModelShape& s, int64_t context) {
  s.default_seq_len = std::min(context, kMaxDefaultSeqLen);
  if (s.max_positions == 0) s.context_length = context;
}

}  // namespace internal

namespace {

using internal::dim;
using internal::dropout_on;
using internal::family_defaults;
using internal::flag;
using internal::optional_dim;
using internal::read_experts;
using internal::read_latent_attention;
using internal::refuse_if;
using internal::refuse_null;
using internal::require_empty_list;
using internal::set_seq_len;
using internal::sized_dim;
using internal::kMaxLayers;
using internal::kMaxVocab;
using internal::kMaxWidth;

constexpr const char* kSupported =
    "llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, phi3, olmo2, olmo3, granite, "
    "smollm3, ernie4_5, seed_oss, glm4, exaone4, mixtral, qwen2_moe, qwen3_moe, olmoe, glm4_moe, "
    "llama4_text, deepseek_v2, deepseek_v3, gpt_oss, gptj, falcon, gpt_neox, gpt2, opt, qwen";

// GeLU-like activations keep their input for backward, ReLU keeps its output (activations.cc).
// The MLP's activation under `key` (transformers' ACT2FN names): ReLU, or a GeLU, which
// "gelu_new", "gelu_fast" and "gelu_accurate" compute as a Python formula (ModelShape::
// gelu_formula).
// The model types zplan reads that Liger-Kernel patches: the keys of MODEL_TYPE_TO_APPLY_LIGER_FN
// (liger_kernel/transformers/monkey_patch.py, linkedin/Liger-Kernel of 2026-08-21), which its
// Trainer integration (use_liger_kernel) and AutoLigerKernelForCausalLM look the config's
// model_type up in; any other type is left unpatched with a warning.
bool liger_patches(const std::string& type) {
  static constexpr const char* kLigerTypes[] = {
      "llama",  "mistral", "qwen2",   "qwen3",   "qwen3_moe", "mixtral",     "gemma",
      "gemma2", "gemma3_text", "phi3", "olmo2",  "olmo3",     "glm4",        "granite",
      "smollm3", "exaone4", "gpt_oss", "llama4_text"};
  for (const char* t : kLigerTypes) {
    if (type == t) return true;
  }
  return false;
}

void read_activation(const JsonReader& r, ModelShape& s, const char* key, const char* fallback) {
  std::string name = r.optional_string(key).value_or(fallback);
  s.activation = name.find("relu") != std::string::npos ? Activation::kRelu : Activation::kGelu;
  s.gelu_formula = name == "gelu_new" || name == "gelu_fast" || name == "gelu_accurate";
}

void check_heads_divide(const JsonReader& r, const char* heads_key, int64_t heads,
                        const char* hidden_key, int64_t hidden) {
  if (hidden % heads != 0) {
    r.fail(heads_key, "must divide " + std::string(hidden_key) + " (" + std::to_string(hidden) +
                          "), got " + std::to_string(heads));
  }
}

// Where the class reads head_dim and falls back to hidden_size / num_attention_heads: an
// uneven split means the config lost its head_dim (GLM-4.5: 5120 / 96), so name that key.
void check_head_dim_from_split(const JsonReader& r, int64_t heads, int64_t hidden) {
  if (hidden % heads != 0) {
    r.fail("head_dim", "absent or null, and num_attention_heads (" + std::to_string(heads) +
                           ") does not divide hidden_size (" + std::to_string(hidden) +
                           "): give head_dim, the width of one attention head");
  }
}

// The keys that size every config, under the names its class gives them (ffn_key null: the MLP
// width comes from elsewhere).
void read_sizes(const JsonReader& r, ModelShape& s, const char* layers_key,
                const char* hidden_key, const char* heads_key, const char* ffn_key) {
  s.layers = dim(r, layers_key, kMaxLayers);
  s.hidden = dim(r, hidden_key, kMaxWidth);
  s.heads = dim(r, heads_key, kMaxWidth);
  if (ffn_key != nullptr) s.ffn = dim(r, ffn_key, kMaxWidth);
  s.vocab = dim(r, "vocab_size", kMaxVocab);
}

// LlamaConfig, MistralConfig, Qwen2Config. num_key_value_heads: absent -> the class default
// (llama: None, mistral: 8, qwen2: 32), null -> num_attention_heads. head_dim: absent or null ->
// hidden_size / num_attention_heads. Tied embeddings default false for all three.
ModelShape llama_like(const JsonReader& r, const std::string& type) {
  ModelShape s = family_defaults(Family::kLlama);
  read_sizes(r, s, "num_hidden_layers", "hidden_size", "num_attention_heads",
             "intermediate_size");
  if (r.has("head_dim")) {
    s.head_dim = dim(r, "head_dim", kMaxWidth);
  } else {
    check_head_dim_from_split(r, s.heads, s.hidden);
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
  read_sizes(r, s, "num_hidden_layers", "hidden_size", "num_attention_heads",
             "intermediate_size");
  check_heads_divide(r, "num_attention_heads", s.heads, "hidden_size", s.hidden);
  s.tied_embeddings = flag(r, "tie_word_embeddings", false);
  s.parallel_residual = flag(r, "use_parallel_residual", true);
  bool attention_bias = flag(r, "attention_bias", true);
  s.linear_bias = attention_bias;
  s.mlp_bias = true;
  bool hidden_dropout = dropout_on(r, "hidden_dropout", 0.0);
  s.attention_dropout = dropout_on(r, "attention_dropout", 0.0);
  s.dropout = hidden_dropout || s.attention_dropout;
  read_activation(r, s, "hidden_act", "gelu");
  set_seq_len(s, optional_dim(r, "max_position_embeddings", 2048, kMaxVocab));
  return s;
}

// GPT2Config: n_embd/n_layer/n_head, n_positions learned positions (default 1024), n_inner null
// -> 4 * n_embd, Conv1D weights (same counts as Linear), tied embeddings by default.
ModelShape gpt2(const JsonReader& r) {
  ModelShape s = family_defaults(Family::kGpt);
  read_sizes(r, s, "n_layer", "n_embd", "n_head", nullptr);
  check_heads_divide(r, "n_head", s.heads, "n_embd", s.hidden);
  s.ffn = optional_dim(r, "n_inner", 4 * s.hidden, kMaxWidth);
  s.max_positions = optional_dim(r, "n_positions", 1024, kMaxVocab);
  s.tied_embeddings = flag(r, "tie_word_embeddings", true);
  s.attention_dropout = dropout_on(r, "attn_pdrop", 0.1);
  bool resid_dropout = dropout_on(r, "resid_pdrop", 0.1);
  bool embed_dropout = dropout_on(r, "embd_pdrop", 0.1);
  s.dropout = resid_dropout || embed_dropout || s.attention_dropout;
  read_activation(r, s, "activation_function", "gelu_new");
  // PretrainedConfig.add_cross_attention: GPT2Block then builds crossattention (q_attn, c_attn,
  // c_proj) and ln_cross_attn in every block (modeling_gpt2.py), used only with encoder states.
  if (r.optional_boolean("add_cross_attention").value_or(false)) {
    r.fail("add_cross_attention",
           "not modelled: GPT-2 cross-attention (every block gets crossattention and "
           "ln_cross_attn, for an encoder-decoder); false plans the decoder-only GPT-2");
  }
  set_seq_len(s, s.max_positions);
  return s;
}

// OPTConfig: ffn_dim, learned positions with 2 extra rows (OPTLearnedPositionalEmbedding's
// offset), ReLU, enable_bias (default true) on every Linear, word_embed_proj_dim (default
// hidden_size; when different, project_in / project_out without bias), the final layer norm only
// with do_layer_norm_before and not _remove_final_layer_norm, tied embeddings by default.
ModelShape opt(const JsonReader& r) {
  ModelShape s = family_defaults(Family::kOpt);
  read_sizes(r, s, "num_hidden_layers", "hidden_size", "num_attention_heads", "ffn_dim");
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
  read_activation(r, s, "activation_function", "relu");
  set_seq_len(s, positions);
  return s;
}

// The gated-MLP decoders beyond Llama: what each transformers config class defaults and builds.
// One general reader (decoder()) takes the shapes; this table holds what differs by model_type.
//
// Which keys put biases on which Linears (each modeling file's nn.Linear(..., bias=...)):
enum class BiasKeys {
  kAttention,     // attention_bias: q, k, v and o_proj (LlamaAttention's rule)
  kAttentionMlp,  // attention_bias as above, mlp_bias: gate, up and down (Granite, SmolLM3)
  kQkv,           // attention_bias: q, k and v only; o_proj never (GLM-4, GLM-4.5)
  kQkvOutMlp,     // attention_bias: q, k, v; attention_out_bias: o_proj; mlp_bias (Seed-OSS)
  kUseBias,       // use_bias: every attention and MLP Linear (ERNIE-4.5)
};
enum class Fused { kNone, kGateUp, kQkvGateUp };  // GLM-4: gate_up_proj; Phi-3: and qkv_proj

struct DecoderType {
  const char* type;
  int64_t kv_heads_default;  // when num_key_value_heads is absent: 0 = num_attention_heads
  int64_t head_dim_default;  // when head_dim is absent: 0 = hidden_size / num_attention_heads
  bool tied_default;
  int64_t context_default;   // max_position_embeddings
  bool qkv_bias;             // q/k/v always have biases (Qwen2-MoE)
  QkNorm qk_norm;
  bool sandwich_norms;       // Gemma-2: input, post-attention, pre- and post-feedforward norms
  bool post_norms_only;      // OLMo-2: post-attention and post-feedforward norms, none before
  Fused fused;
  BiasKeys bias_keys;
  bool bias_default;         // attention_bias (kUseBias: use_bias) when absent
};

// transformers configuration_<type>.py defaults; the modeling files fix the rest (no biases
// unless the bias keys say so; Qwen2MoeAttention has q/k/v biases; Qwen3 and Qwen3-MoE normalize
// q and k per head, OLMo-2 and OLMoE over the whole projections, GLM-4.5 per head when
// use_qk_norm).
constexpr DecoderType kDecoderTypes[] = {
    // type        kv  head_dim tied   context  qkv_b  qk_norm            sandw. post   fused
    {"qwen3",      32, 128,     false, 32768,   false, QkNorm::kPerHead,  false, false, Fused::kNone,
     BiasKeys::kAttention, false},
    {"gemma",      16, 256,     true,  8192,    false, QkNorm::kNone,     false, false, Fused::kNone,
     BiasKeys::kAttention, false},
    {"gemma2",     4,  256,     true,  8192,    false, QkNorm::kNone,     true,  false, Fused::kNone,
     BiasKeys::kAttention, false},
    // Gemma3TextConfig (configuration_gemma3.py): Gemma-2's sandwich norms, with q_norm and
    // k_norm on each head (Gemma3Attention), both soft-caps off by default.
    {"gemma3_text", 4, 256,     true,  131072,  false, QkNorm::kPerHead,  true,  false, Fused::kNone,
     BiasKeys::kAttention, false},
    {"phi3",       0,  0,       false, 4096,    false, QkNorm::kNone,     false, false,
     Fused::kQkvGateUp, BiasKeys::kAttention, false},
    {"olmo2",      0,  0,       false, 2048,    false, QkNorm::kFull,     false, true,  Fused::kNone,
     BiasKeys::kAttention, false},
    // Exaone4Config (EXAONE 4.0): Exaone4DecoderLayer is Olmo2DecoderLayer (norms after the
    // sublayers only) with q_norm and k_norm on each head (Exaone4Attention, no biases); head_dim
    // falls back to hidden / heads. Its sliding layers and the rotary-free full layers add no
    // parameter: zplan prices full causal attention in every layer.
    {"exaone4",    32, 0,       false, 2048,    false, QkNorm::kPerHead,  false, true,  Fused::kNone,
     BiasKeys::kAttention, false},
    // Olmo3Config: OLMo-2's modules and defaults; its sliding window (three layers in four, by
    // layer_types) changes no parameter: zplan prices full causal attention in every layer.
    {"olmo3",      0,  0,       false, 2048,    false, QkNorm::kFull,     false, true,  Fused::kNone,
     BiasKeys::kAttention, false},
    {"mixtral",    8,  0,       false, 131072,  false, QkNorm::kNone,     false, false, Fused::kNone,
     BiasKeys::kAttention, false},
    {"qwen2_moe",  16, 0,       false, 32768,   true,  QkNorm::kNone,     false, false, Fused::kNone,
     BiasKeys::kAttention, false},
    {"qwen3_moe",  4,  128,     false, 32768,   false, QkNorm::kPerHead,  false, false, Fused::kNone,
     BiasKeys::kAttention, false},
    {"deepseek_v2", 32, 0,      false, 2048,    false, QkNorm::kNone,     false, false, Fused::kNone,
     BiasKeys::kAttention, false},
    {"deepseek_v3", 128, 0,     false, 4096,    false, QkNorm::kNone,     false, false, Fused::kNone,
     BiasKeys::kAttention, false},
    // GptOssConfig: its MoE in read_experts, its attention bias (default true) and sinks in
    // decoder(). layer_types (every other layer attends to the last 128 tokens) change no
    // parameter: zplan prices full causal attention in every layer. quantization_config (the
    // released MXFP4 experts) is ignored: training loads the checkpoint dequantized to bf16
    // (Mxfp4Config(dequantize=True)).
    {"gpt_oss",    8,  64,      false, 131072,  false, QkNorm::kNone,     false, false, Fused::kNone,
     BiasKeys::kAttention, true},
    // GraniteConfig: Llama's modules; its embedding, residual, attention and logit multipliers
    // are scalars, not parameters. Every Granite 3.x checkpoint sets tie_word_embeddings true.
    {"granite",    0,  0,       false, 2048,    false, QkNorm::kNone,     false, false, Fused::kNone,
     BiasKeys::kAttentionMlp, false},
    // SmolLM3Config: Llama's modules; no_rope_layers and the sliding window add no parameter.
    {"smollm3",    4,  0,       true,  32768,   false, QkNorm::kNone,     false, false, Fused::kNone,
     BiasKeys::kAttentionMlp, false},
    // Ernie4_5Config: head_dim 128 whatever hidden_size / heads (q_proj is not square).
    {"ernie4_5",   2,  128,     true,  131072,  false, QkNorm::kNone,     false, false, Fused::kNone,
     BiasKeys::kUseBias, false},
    // SeedOssConfig: q/k/v biases by default (attention_bias true), o_proj's own key.
    {"seed_oss",   8,  128,     false, 524288,  false, QkNorm::kNone,     false, false, Fused::kNone,
     BiasKeys::kQkvOutMlp, true},
    // Glm4Config (GLM-4-0414): input_layernorm, post_self_attn_layernorm after the attention,
    // post_attention_layernorm, post_mlp_layernorm after the MLP (Gemma-2's sandwich); one
    // gate_up_proj (Phi3MLP); q/k/v biases by default, o_proj never.
    {"glm4",       2,  128,     false, 131072,  false, QkNorm::kNone,     true,  false,
     Fused::kGateUp, BiasKeys::kQkv, true},
    // Glm4MoeConfig (GLM-4.5, GLM-4.6): pre-norm like Llama; head_dim is no field of the class
    // (Glm4MoeAttention reads config.head_dim, which every checkpoint sets, else hidden_size //
    // heads); q_norm and k_norm per head when use_qk_norm (decoder()); its MoE in read_experts.
    {"glm4_moe",   8,  0,       false, 131072,  false, QkNorm::kNone,     false, false, Fused::kNone,
     BiasKeys::kQkv, false},
    // OlmoeConfig: OLMo's pre-norm block with q_norm and k_norm over the whole projections, and
    // experts in every block (read_experts).
    {"olmoe",      0,  0,       false, 4096,    false, QkNorm::kFull,     false, false, Fused::kNone,
     BiasKeys::kAttention, false},
    // Llama4TextConfig (the language model of Llama 4 Scout and Maverick): Llama's attention
    // (its L2 q/k norm has no weight; chunked attention and the NoPE layers are priced as full
    // causal attention), feed_forward in place of mlp, its MoE in read_experts.
    {"llama4_text", 8, 128,     false, 131072,  false, QkNorm::kNone,     false, false, Fused::kNone,
     BiasKeys::kAttention, false},
};

const DecoderType* decoder_type(const std::string& type) {
  for (const DecoderType& t : kDecoderTypes) {
    if (type == t.type) return &t;
  }
  return nullptr;
}

// A bias key: absent -> the class default; null -> no bias (nn.Linear(..., bias=None) builds
// none, whatever the default).
bool bias_flag(const JsonReader& r, const char* key, bool fallback) {
  if (r.is_null(key)) return false;
  return flag(r, key, fallback);
}

// The biases the type's keys put on the attention and MLP Linears (DecoderType::bias_keys).
void read_biases(const JsonReader& r, const DecoderType& t, ModelShape& s) {
  if (t.bias_keys == BiasKeys::kUseBias) {
    const bool all = bias_flag(r, "use_bias", t.bias_default);
    s.qkv_bias = s.attn_out_bias = s.mlp_bias = all;
    return;
  }
  const bool attention_bias = bias_flag(r, "attention_bias", t.bias_default);
  s.qkv_bias = t.qkv_bias || attention_bias;
  switch (t.bias_keys) {
    case BiasKeys::kAttention:
      s.attn_out_bias = attention_bias;
      break;
    case BiasKeys::kAttentionMlp:
      s.attn_out_bias = attention_bias;
      s.mlp_bias = bias_flag(r, "mlp_bias", false);
      break;
    case BiasKeys::kQkv:
      break;
    case BiasKeys::kQkvOutMlp:
      s.attn_out_bias = bias_flag(r, "attention_out_bias", false);
      s.mlp_bias = bias_flag(r, "mlp_bias", false);
      break;
    case BiasKeys::kUseBias:
      break;
  }
}

// The general gated-MLP decoder: Qwen3, Gemma, Gemma-2, Gemma-3, Phi-3, OLMo-2, Granite,
// SmolLM3, ERNIE-4.5, Seed-OSS, GLM-4, Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, GLM-4.5,
// Llama 4, DeepSeek-V2 and V3, GPT-OSS. Sliding windows, soft-capping, rope scaling and query
// scaling change neither parameters nor stored activations and are ignored.
ModelShape decoder(const JsonReader& r, const DecoderType& t, int transformers_major) {
  const std::string type = t.type;
  ModelShape s = family_defaults(Family::kLlama);
  read_sizes(r, s, "num_hidden_layers", "hidden_size", "num_attention_heads",
             "intermediate_size");
  const bool mla = type == "deepseek_v2" || type == "deepseek_v3";
  if (mla) {
    read_latent_attention(r, s);
    s.kv_heads = s.heads;  // every head has its own key and value after kv_b_proj
  } else {
    if (r.has("head_dim")) {
      s.head_dim = dim(r, "head_dim", kMaxWidth);
    } else if (t.head_dim_default > 0 && !r.json().contains("head_dim")) {
      s.head_dim = t.head_dim_default;
    } else {
      check_head_dim_from_split(r, s.heads, s.hidden);
    }
    int64_t kv_default = s.heads;
    if (!r.json().contains("num_key_value_heads") && t.kv_heads_default > 0) {
      kv_default = t.kv_heads_default;
    }
    s.kv_heads = optional_dim(r, "num_key_value_heads", kv_default, kMaxWidth);
    if (s.heads % s.kv_heads != 0) {
      r.fail(r.has("num_key_value_heads") ? "num_key_value_heads" : "num_attention_heads",
             "num_key_value_heads (" + std::to_string(s.kv_heads) +
                 ") must divide num_attention_heads (" + std::to_string(s.heads) + ")");
    }
  }
  s.tied_embeddings = flag(r, "tie_word_embeddings", t.tied_default);
  read_biases(r, t, s);
  // GptOssAttention.sinks: one logit per head joined to every row of the scores.
  s.attention_sinks = type == "gpt_oss";
  s.qk_norm = t.qk_norm;
  // GemmaRMSNorm (Gemma2RMSNorm, Gemma3RMSNorm alike) and Olmo2RMSNorm (Olmo3RMSNorm is it)
  // apply the weight in fp32; the other families' norms are LlamaRMSNorm's.
  if (type == "gemma" || type == "gemma2" || type == "gemma3_text") {
    s.rms_code = RmsNormCode::kGemma;
  } else if (type == "olmo2" || type == "olmo3") {
    s.rms_code = RmsNormCode::kOlmo2;
  }
  // Glm4MoeAttention: q_norm and k_norm of width head_dim on each head when use_qk_norm.
  if (type == "glm4_moe" && flag(r, "use_qk_norm", false)) s.qk_norm = QkNorm::kPerHead;
  // Llama 4's qk norm (Llama4TextL2Norm) has no weight and changes no count, but the key is
  // still read as the boolean it is.
  if (type == "llama4_text") flag(r, "use_qk_norm", true);
  s.fused_qkv = t.fused == Fused::kQkvGateUp;
  s.fused_gate_up = t.fused != Fused::kNone;
  if (t.sandwich_norms) s.post_sublayer_norm = true;
  s.glm_norm_names = type == "glm4";
  if (t.post_norms_only) {
    s.pre_norm = false;
    s.post_sublayer_norm = true;
  }
  s.dropout = dropout_on(r, "attention_dropout", 0.0);
  if (type == "phi3") {
    // Phi3DecoderLayer's resid_attn_dropout / resid_mlp_dropout; zplan's one dropout flag covers
    // them with the attention dropout.
    s.dropout = s.dropout || dropout_on(r, "resid_pdrop", 0.0) || dropout_on(r, "embd_pdrop", 0.0);
  }
  if (type == "mixtral" || type == "qwen2_moe" || type == "qwen3_moe" || type == "deepseek_v2" ||
      type == "deepseek_v3" || type == "gpt_oss" || type == "glm4_moe" || type == "olmoe" ||
      type == "llama4_text") {
    read_experts(r, type, transformers_major, s);
  }
  if (type == "gemma2" || type == "gemma3_text") {
    // Gemma2Config: both caps default on; null turns one off (modeling_gemma2.py tests `is not
    // None`). Gemma3TextConfig: both default None (off).
    auto cap = [&](const char* key, double fallback) {
      if (!r.json().contains(key)) return fallback;
      if (r.json().at(key).is_null()) return 0.0;
      return r.positive_number(key);
    };
    const bool gemma2 = type == "gemma2";
    s.attn_logit_softcapping = cap("attn_logit_softcapping", gemma2 ? 50.0 : 0.0);
    s.final_logit_softcapping = cap("final_logit_softcapping", gemma2 ? 30.0 : 0.0);
  }
  refuse_if(r, "use_bidirectional_attention", flag(r, "use_bidirectional_attention", false),
            "not modelled: bidirectional attention (EmbeddingGemma: every token attends to every "
            "other, not causally)");
  // DeepSeek-V3's and GLM-4.5's multi-token-prediction layer (model.layers.61 / .46 / .92 of
  // the checkpoint) is not built by transformers (DeepseekV3Model's and Glm4MoeModel's
  // _keys_to_ignore_on_load_unexpected drop it), so a Trainer run does not train it; elsewhere
  // the key would mean layers zplan does not build.
  refuse_if(r, "num_nextn_predict_layers",
            type != "deepseek_v3" && type != "glm4_moe" && r.has("num_nextn_predict_layers") &&
                r.non_negative_integer("num_nextn_predict_layers") > 0,
            "not modelled: multi-token-prediction layers");
  set_seq_len(s, optional_dim(r, "max_position_embeddings", t.context_default, kMaxVocab));
  return s;
}

// GPTJConfig: n_embd/n_layer/n_head, n_inner null -> 4 * n_embd, rotary (no position table),
// gelu_new; GPTJBlock runs attention and MLP in parallel from one ln_1; q/k/v/out_proj without
// bias, fc_in/fc_out and lm_head with bias; untied by default.
ModelShape gptj(const JsonReader& r) {
  ModelShape s = family_defaults(Family::kGptj);
  read_sizes(r, s, "n_layer", "n_embd", "n_head", nullptr);
  check_heads_divide(r, "n_head", s.heads, "n_embd", s.hidden);
  s.ffn = optional_dim(r, "n_inner", 4 * s.hidden, kMaxWidth);
  s.tied_embeddings = flag(r, "tie_word_embeddings", false);
  if (s.tied_embeddings) {
    r.fail("tie_word_embeddings", "not modelled: a tied GPT-J head (its lm_head has a bias)");
  }
  s.attention_dropout = dropout_on(r, "attn_pdrop", 0.0);
  s.dropout = dropout_on(r, "resid_pdrop", 0.0) || dropout_on(r, "embd_pdrop", 0.0) ||
              s.attention_dropout;
  read_activation(r, s, "activation_function", "gelu_new");
  set_seq_len(s, optional_dim(r, "n_positions", 2048, kMaxVocab));
  return s;
}

// FalconConfig (also the RefinedWeb remote-code configs, whose keys it reads): n_layer /
// num_hidden_layers, n_head / num_attention_heads; keys and values: new_decoder_architecture ->
// num_kv_heads (n_head_kv; default num_attention_heads), else multi_query (default true) -> 1,
// else num_attention_heads; parallel_attn (true) with one input_layernorm, or with the new
// decoder architecture num_ln_in_parallel_attn (null -> 2) norms; bias (false) on every Linear;
// ffn_hidden_size (null -> 4 * hidden); tied by default. ALiBi models have no rotary.
ModelShape falcon(const JsonReader& r) {
  ModelShape s = family_defaults(Family::kFalcon);
  const char* layers_key = r.has("num_hidden_layers") ? "num_hidden_layers" : "n_layer";
  const char* heads_key = r.has("num_attention_heads") ? "num_attention_heads" : "n_head";
  read_sizes(r, s, layers_key, "hidden_size", heads_key, nullptr);
  check_heads_divide(r, heads_key, s.heads, "hidden_size", s.hidden);
  s.ffn = optional_dim(r, "ffn_hidden_size", 4 * s.hidden, kMaxWidth);
  const bool new_arch = flag(r, "new_decoder_architecture", false);
  if (new_arch) {
    const char* kv_key = r.has("num_kv_heads") ? "num_kv_heads" : "n_head_kv";
    s.kv_heads = optional_dim(r, kv_key, s.heads, kMaxWidth);
    if (s.heads % s.kv_heads != 0) {
      r.fail(kv_key, "must divide " + std::string(heads_key) + " (" + std::to_string(s.heads) +
                         "), got " + std::to_string(s.kv_heads));
    }
  } else {
    s.kv_heads = flag(r, "multi_query", true) ? 1 : s.heads;
  }
  s.parallel_residual = new_arch || flag(r, "parallel_attn", true);
  s.parallel_norms = 1;
  if (new_arch) {
    s.parallel_norms = r.has("num_ln_in_parallel_attn")
                           ? r.positive_integer("num_ln_in_parallel_attn")
                           : 2;
    if (s.parallel_norms > 2) r.fail("num_ln_in_parallel_attn", "must be 1 or 2");
  }
  s.linear_bias = flag(r, "bias", false);
  s.tied_embeddings = flag(r, "tie_word_embeddings", true);
  s.attention_dropout = dropout_on(r, "attention_dropout", 0.0);
  s.dropout = dropout_on(r, "hidden_dropout", 0.0) || s.attention_dropout;
  read_activation(r, s, "activation", "gelu");
  set_seq_len(s, optional_dim(r, "max_position_embeddings", 2048, kMaxVocab));
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

// A vision-language checkpoint (Qwen2.5-VL, Mistral-3, LLaVA, Llama 4, ...): the tower and its
// projector are not modelled, whatever the model_type. Where text_config names a type zplan
// reads, say so.
[[noreturn]] void refuse_vision_tower(const JsonReader& r, const std::string& type) {
  std::string text_type;
  const nlohmann::json& tc = r.json().value("text_config", nlohmann::json());
  if (tc.is_object() && tc.contains("model_type") && tc.at("model_type").is_string()) {
    text_type = tc.at("model_type").get<std::string>();
  }
  // Qwen-VL language models are their text family's decoder under a model_type of their own
  // (Qwen2VLTextModel and Qwen2_5_VLTextModel: Qwen2's q/k/v-biased attention and SwiGLU,
  // Qwen3VLTextModel: Qwen3's with per-head q/k norms; the multimodal rotary embedding has no
  // parameters), with their keys at the top level in configs older than text_config.
  const std::string as_text = type == "qwen2_vl" || type == "qwen2_5_vl" ? "qwen2"
                              : type == "qwen3_vl"                        ? "qwen3"
                                                                          : "";
  const std::vector<std::string> known = hf_model_types();
  const bool readable = std::find(known.begin(), known.end(), text_type) != known.end();
  std::string how;
  if (!as_text.empty()) {
    how = "its language model's keys (text_config, or the top level of an older config) as a "
          "config.json of their own with model_type " + as_text;
  } else if (readable) {
    how = "text_config (model_type " + text_type + ") as a config.json of its own";
  } else {
    how = "the language model's keys as a config.json of their own with a model_type zplan "
          "reads";
  }
  r.fail("vision_config", "not modelled: the vision tower of a " + type +
                              " checkpoint (zplan plans language models); to plan its language "
                              "model alone, save " + how);
}

}  // namespace

std::vector<std::string> hf_model_types() {
  std::vector<std::string> out;
  std::string list = kSupported;
  size_t start = 0;
  while (start < list.size()) {
    size_t comma = list.find(", ", start);
    if (comma == std::string::npos) comma = list.size();
    out.push_back(list.substr(start, comma - start));
    start = comma + 2;
  }
  return out;
}

Model model_from_hf_config(const nlohmann::json& config, const std::string& file,
                           int transformers_major) {
  JsonReader r(config, file);
  if (!config.is_object()) r.fail("must be a JSON object, got " + describe_json_value(config));
  std::string type = r.string("model_type");
  // A null vision_config is no tower (Llama4ForCausalLM and the text classes ignore the key).
  if (r.has("vision_config") && type != "gemma3") refuse_vision_tower(r, type);
  ModelShape shape;
  if (type == "llama" || type == "mistral" || type == "qwen2") {
    shape = llama_like(r, type);
  } else if (type == "gpt_neox") {
    shape = gpt_neox(r);
  } else if (type == "gpt2") {
    shape = gpt2(r);
  } else if (type == "opt") {
    shape = opt(r);
  } else if (const DecoderType* t = decoder_type(type)) {
    shape = decoder(r, *t, transformers_major);
  } else if (type == "gptj") {
    shape = gptj(r);
  } else if (type == "qwen") {
    shape = internal::qwen_v1(r);
  } else if (type == "falcon" || type == "RefinedWebModel" || type == "RefinedWeb") {
    shape = falcon(r);
  } else if (type == "gemma3") {
    // Gemma3Config: a SigLIP vision tower and projector (vision_config, ~0.4 B parameters) in
    // front of the language model (text_config, model_type gemma3_text).
    r.fail("vision_config",
           "not modelled: Gemma-3's vision tower (Gemma3ForConditionalGeneration); to plan the "
           "language model alone (Gemma3ForCausalLM), save this file's text_config as a file of "
           "its own (its model_type is gemma3_text)");
  } else {
    r.fail("model_type",
           "unsupported model_type \"" + type + "\"; supported: " + std::string(kSupported));
  }
  shape.name = model_name(r, file);
  shape.liger = liger_patches(type);
  if (const auto q = config.find("quantization_config"); q != config.end() && q->is_object()) {
    const auto m = q->find("quant_method");
    shape.quant_method = m != q->end() && m->is_string() ? m->get<std::string>() : "unnamed";
  }
  return build_model(shape, file);
}

}  // namespace zplan::models
