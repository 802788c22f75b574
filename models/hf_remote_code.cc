// config.json readers for models whose modeling code ships with the checkpoint (auto_map,
// trust_remote_code=True) rather than with transformers: Qwen v1 (model_type qwen).
#include <cstdint>
#include <string>

#include "base/json_reader.h"
#include "models/hf_reader.h"
#include "models/model_internal.h"

namespace zplan::models::internal {

namespace {

// The key a config spells either way: QWenConfig's first release wrote GPT-2's names (n_embd,
// n_layer, n_head, n_positions, ffn_hidden_size) with an attribute_map to the new ones; the
// release of September 2023 and every later checkpoint write hidden_size and the rest.
const char* spelled(const JsonReader& r, const char* key, const char* old_key) {
  return !r.has(key) && r.has(old_key) ? old_key : key;
}

}  // namespace

// QWenConfig and QWenLMHeadModel (Qwen/Qwen-1_8B ... Qwen-72B, and their -Chat checkpoints:
// configuration_qwen.py and modeling_qwen.py). QWenModel: wte, drop, h (QWenBlock: ln_1 and
// ln_2 RMSNorms, QWenAttention, QWenMLP), ln_f; lm_head without bias, untied by default.
//  - QWenAttention: c_attn = Linear(h, 3 * kv_channels * heads) with a bias always, c_proj
//    with a bias unless no_bias (default true); the fused output is split at hidden_size and
//    viewed as heads x hidden / heads, so kv_channels * heads must be hidden_size. Rotary (no
//    position table; rotary_pct < 1 rotates part of each head); its NTK and log-n scalings run
//    at inference only.
//  - QWenMLP: w1 and w2 = Linear(h, intermediate_size // 2), c_proj back to h, biases unless
//    no_bias; c_proj(w1(x) * silu(w2(x))). intermediate_size is twice the MLP's width.
//  - Attention: flash-attn 2's varlen kernel when use_flash_attn ("auto": when the model is 16
//    bit) and the package imports, else QWenAttention._attn (softmax in the compute dtype); no
//    SDPA path. use_flash_attn false is kept (ModelShape::flash_attn_off); softmax_in_fp32
//    (default false) upcasts the eager softmax to fp32 and back, as the Llama family's does.
//  - bf16 / fp16 / fp32 pick the dtype the model loads in (all false: the GPU's best); the
//    planned precision is the ds_config's or --precision, so they are not read.
ModelShape qwen_v1(const JsonReader& r) {
  // Qwen-VL and Qwen-VL-Chat: model_type qwen with `visual`, the ViT and its resampler that
  // QWenModel builds as transformer.visual (~1.9 B parameters) in front of the same decoder.
  if (r.has("visual")) {
    r.fail("visual", "not modelled: the vision tower of a Qwen-VL checkpoint (QWenModel's "
                     "transformer.visual; zplan plans language models); to plan its language "
                     "model alone, save the config without the visual key");
  }
  ModelShape s = family_defaults(Family::kLlama);
  s.qwen_names = true;
  s.layers = dim(r, spelled(r, "num_hidden_layers", "n_layer"), kMaxLayers);
  const char* hidden_key = spelled(r, "hidden_size", "n_embd");
  s.hidden = dim(r, hidden_key, kMaxWidth);
  const char* heads_key = spelled(r, "num_attention_heads", "n_head");
  s.heads = dim(r, heads_key, kMaxWidth);
  s.vocab = dim(r, "vocab_size", kMaxVocab);
  const char* ffn_key = spelled(r, "intermediate_size", "ffn_hidden_size");
  const int64_t ffn = dim(r, ffn_key, kMaxWidth);
  if (ffn < 2) r.fail(ffn_key, "must be at least 2 (QWenMLP's width is half of it)");
  s.ffn = ffn / 2;
  s.head_dim = optional_dim(r, "kv_channels", 128, kMaxWidth);
  s.kv_heads = s.heads;
  if (s.head_dim * s.heads != s.hidden) {
    r.fail("kv_channels", "kv_channels (" + std::to_string(s.head_dim) + ") x " + heads_key +
                              " (" + std::to_string(s.heads) + ") must equal " + hidden_key +
                              " (" + std::to_string(s.hidden) +
                              "): QWenAttention splits c_attn's output at hidden_size");
  }
  s.qkv_bias = true;
  const bool bias = !flag(r, "no_bias", true);
  s.attn_out_bias = bias;
  s.mlp_bias = bias;
  s.tied_embeddings = flag(r, "tie_word_embeddings", false);
  // Dropout on the attention probabilities (attn_dropout_prob; attn_pdrop in the first
  // release) and on the embeddings' output (emb_dropout_prob / embd_pdrop; not stored apart:
  // zplan's one flag covers both, as for the other llama-family decoders).
  s.dropout = dropout_on(r, spelled(r, "attn_dropout_prob", "attn_pdrop"), 0.0) ||
              dropout_on(r, spelled(r, "emb_dropout_prob", "embd_pdrop"), 0.0);
  s.attention_dropout = true;
  s.qwen_softmax_in_fp32 = flag(r, "softmax_in_fp32", false);
  if (r.has("use_flash_attn")) {
    const nlohmann::json& v = r.json().at("use_flash_attn");
    if (v.is_boolean()) {
      s.flash_attn_off = !v.get<bool>();
    } else if (!(v.is_string() && v.get<std::string>() == "auto")) {
      r.fail("use_flash_attn", "must be true, false or \"auto\", got " + describe_json_value(v));
    }
  }
  // seq_length: the context the checkpoint was trained for (QWenConfig default 2048; 8192 in
  // Qwen-7B's and 14B's config.json, 32768 in 72B's); max_position_embeddings only sizes the
  // eager path's causal-mask buffer.
  set_seq_len(s, optional_dim(r, "seq_length", 2048, kMaxVocab));
  return s;
}

}  // namespace zplan::models::internal
