// build_model: a ModelShape -> the layers, modules, parameter tensors and forward ops of the
// network, named as the Hugging Face implementation of each family names its modules.
//
// Parameter counts follow reference/deepspeed_internals.md §7:
//   GPT/OPT:  L*(12h^2 + 13h) + V*h + P*h + 2h        (tied, learned positions P)
//   NeoX:     L*(12h^2 + 13h) + 2*V*h + 2h            (untied, rotary)
//   Llama:    L*(2h^2 + 2*h*g*d + 3*h*f + 2h) + 2*V*h + h
// and are not written out here: they fall out of the tensors each builder creates.
//
// Memory-bound ops carry the bytes their kernels read and write per token with 16-bit
// activations (an element is 2 bytes; a dropout mask byte is 1), and how many kernels that is.
// Most are one kernel; Hugging Face's RMSNorm, rotary and gelu_new formula are eager chains of
// several, counted as PyTorch runs them (models/eager_ops.h), with the one kernel that replaces
// the first two under Liger-Kernel. docs/models.md lists them.
#include <string>
#include <utility>
#include <vector>

#include "base/input_error.h"
#include "base/text.h"
#include "models/eager_ops.h"
#include "models/layer_builder.h"
#include "models/model.h"
#include "models/model_internal.h"
#include "models/module_names.h"

namespace zplan::models {

namespace {

using internal::add_bytes;
using internal::dropout_bytes;
using internal::kMaxLayers;
using internal::LayerBuilder;
using internal::kMaxSeqLen;
using internal::kMaxVocab;
using internal::kMaxWidth;
using internal::ModuleNames;
using internal::module_names;



void fail(const std::string& where, const std::string& field, const std::string& problem) {
  throw InputError(json_location(where, "/" + field), problem);
}

void check_range(const std::string& where, const std::string& field, int64_t value, int64_t min,
                 int64_t max) {
  if (value < min) {
    fail(where, field,
         (min == 1 ? "must be a positive integer, got " : "must not be negative, got ") +
             std::to_string(value));
  }
  if (value > max) {
    fail(where, field, "must be at most " + std::to_string(max) + ", got " + std::to_string(value));
  }
}

// Checks a shape and fills in kv_heads and head_dim.
ModelShape normalized(ModelShape s, const std::string& where) {
  check_range(where, "layers", s.layers, 1, kMaxLayers);
  check_range(where, "hidden", s.hidden, 1, kMaxWidth);
  check_range(where, "default_seq_len", s.default_seq_len, 1, kMaxSeqLen);
  if (s.family == Family::kMlp) return s;

  check_range(where, "heads", s.heads, 1, kMaxWidth);
  check_range(where, "kv_heads", s.kv_heads, 0, kMaxWidth);
  check_range(where, "head_dim", s.head_dim, 0, kMaxWidth);
  check_range(where, "ffn", s.ffn, 1, kMaxWidth);
  check_range(where, "vocab", s.vocab, 1, kMaxVocab);
  check_range(where, "max_positions", s.max_positions, 0, kMaxVocab);
  check_range(where, "embed_proj_dim", s.embed_proj_dim, 0, kMaxWidth);
  if (s.kv_heads == 0) s.kv_heads = s.heads;
  if (s.heads % s.kv_heads != 0) {
    fail(where, "kv_heads",
         "must divide heads (" + std::to_string(s.heads) + "), got " + std::to_string(s.kv_heads));
  }
  if (s.head_dim == 0) {
    if (s.hidden % s.heads != 0) {
      fail(where, "heads",
           "must divide hidden (" + std::to_string(s.hidden) + "), got " + std::to_string(s.heads));
    }
    s.head_dim = s.hidden / s.heads;
  }
  if (s.heads * s.head_dim > kMaxWidth) {
    fail(where, "head_dim", "heads * head_dim must be at most " + std::to_string(kMaxWidth));
  }
  if (s.parallel_residual && !s.pre_norm) {
    fail(where, "pre_norm", "a parallel-residual block normalizes its input: must be true");
  }
  check_range(where, "parallel_norms", s.parallel_norms, 1, 2);
  if (s.lm_head_bias && s.tied_embeddings) {
    fail(where, "lm_head_bias", "a tied LM head has no bias of its own");
  }
  if (s.post_sublayer_norm && s.parallel_residual) {
    fail(where, "post_sublayer_norm", "is not built for parallel-residual blocks");
  }
  if ((s.fused_qkv || s.fused_gate_up || s.qk_norm != QkNorm::kNone || s.moe() || s.mla() ||
       s.qwen_names) &&
      s.family != Family::kLlama) {
    fail(where, "family",
         "fused projections, q/k norms, experts, latent attention and Qwen v1's modules are "
         "built for the llama family (gated-MLP decoders) only");
  }
  if (s.qwen_names && (s.moe() || s.mla() || s.fused_gate_up || s.qk_norm != QkNorm::kNone)) {
    fail(where, "qwen_names", "Qwen v1's block has a dense MLP and plain attention");
  }
  check_range(where, "experts", s.experts, 0, kMaxWidth);
  if (s.moe()) {
    check_range(where, "experts_per_token", s.experts_per_token, 1, s.experts);
    check_range(where, "expert_ffn", s.expert_ffn, 1, kMaxWidth);
    check_range(where, "shared_expert_ffn", s.shared_expert_ffn, 0, kMaxWidth);
    check_range(where, "dense_layers", s.dense_layers, 0, s.layers);
    check_range(where, "moe_layer_step", s.moe_layer_step, 1, s.layers);
    if (s.dense_experts && !s.fused_experts) {
      fail(where, "dense_experts", "needs the experts' 3D tensors (fused_experts true)");
    }
    if (s.shared_expert_gate && s.shared_expert_ffn == 0) {
      fail(where, "shared_expert_gate", "needs a shared expert (shared_expert_ffn > 0)");
    }
    if ((s.expert_loop || s.gpt_oss_experts) && !s.fused_experts) {
      fail(where, s.expert_loop ? "expert_loop" : "gpt_oss_experts",
           "needs the experts' 3D tensors (fused_experts true)");
    }
    if (s.moe_block_class.empty()) {
      s.moe_block_class = "transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock";
    }
    // Mixtral's attribute: block_sparse_moe in transformers 4.x, mlp in 5 (the 3D layout).
    if (s.moe_block_name.empty()) s.moe_block_name = s.fused_experts ? "mlp" : "block_sparse_moe";
  } else if (s.experts_per_token != 0 || s.expert_ffn != 0 || s.shared_expert_ffn != 0 ||
             s.dense_layers != 0 || s.shared_expert_gate || s.fused_experts || s.expert_loop ||
             s.gpt_oss_experts) {
    fail(where, "experts", "expert settings given without experts (experts must be > 0)");
  }
  check_range(where, "kv_lora_rank", s.kv_lora_rank, 0, kMaxWidth);
  if (s.mla()) {
    check_range(where, "q_lora_rank", s.q_lora_rank, 0, kMaxWidth);
    check_range(where, "qk_nope_head_dim", s.qk_nope_head_dim, 0, kMaxWidth);
    check_range(where, "qk_rope_head_dim", s.qk_rope_head_dim, 0, kMaxWidth);
    check_range(where, "v_head_dim", s.v_head_dim, 1, kMaxWidth);
    if (s.qk_nope_head_dim + s.qk_rope_head_dim == 0) {
      fail(where, "qk_nope_head_dim", "qk_nope_head_dim + qk_rope_head_dim must be positive");
    }
    if (s.heads * (s.qk_nope_head_dim + s.qk_rope_head_dim + s.v_head_dim) > kMaxWidth) {
      fail(where, "heads", "heads * (qk head dim + v_head_dim) must be at most " +
                               std::to_string(kMaxWidth));
    }
    if (s.fused_qkv || s.qk_norm != QkNorm::kNone) {
      fail(where, "kv_lora_rank", "latent attention has no fused qkv or q/k norms");
    }
  } else if (s.q_lora_rank != 0 || s.qk_nope_head_dim != 0 || s.qk_rope_head_dim != 0 ||
             s.v_head_dim != 0) {
    fail(where, "kv_lora_rank",
         "latent-attention dims given without kv_lora_rank (it must be > 0)");
  }
  if ((s.family == Family::kLlama) != (s.activation == Activation::kSwiglu)) {
    fail(where, "activation",
         s.family == Family::kLlama
             ? std::string("the llama family has a gated MLP: must be swiglu")
             : std::string("swiglu (a gated MLP) is built for the llama family only"));
  }
  return s;
}

Layer mlp_layer(const ModelShape& s, int64_t i) {
  std::string name = "layers." + std::to_string(i);
  LayerBuilder b(name, LayerKind::kLinear, /*checkpointed=*/true);
  b.linear(name, s.hidden, s.hidden, /*bias=*/true);
  if (i + 1 < s.layers) {
    b.memory_op("relu", 4.0 * static_cast<double>(s.hidden));
  } else {
    // MSE loss reads the output and the target.
    b.memory_op("mse_loss", 4.0 * static_cast<double>(s.hidden));
  }
  return b.take();
}

class TransformerBuilder {
 public:
  explicit TransformerBuilder(const ModelShape& s) : s_(s), n_(module_names(s)) {
    q_dim_ = s.heads * s.head_dim;
    kv_dim_ = s.kv_heads * s.head_dim;
    embed_dim_ = s.embed_proj_dim > 0 ? s.embed_proj_dim : s.hidden;
    qkv_bias_ = s.linear_bias || s.qkv_bias;
    out_bias_ = s.linear_bias || s.attn_out_bias;
    mlp_bias_ = s.linear_bias || s.mlp_bias;
    // Llama-family blocks have no hidden-state dropout; for them `dropout` is attention dropout.
    hidden_dropout_ = s.dropout && s.family != Family::kLlama;
  }

  std::vector<Layer> build() {
    std::vector<Layer> layers;
    layers.push_back(embedding());
    for (int64_t i = 0; i < s_.layers; ++i) layers.push_back(block(i));
    if (s_.final_norm) {
      LayerBuilder b("final_norm", LayerKind::kFinalNorm, false);
      b.rms_code = s_.rms_code;
      b.norm(n_.final_norm, s_.hidden, s_.norm);
      layers.push_back(b.take());
    }
    layers.push_back(lm_head());
    return layers;
  }

 private:
  Layer embedding() {
    LayerBuilder b("embedding", LayerKind::kEmbedding, false);
    b.embedding(n_.tokens, s_.vocab, embed_dim_);
    if (s_.max_positions > 0) b.embedding(n_.positions, s_.max_positions, s_.hidden);
    // OPT-350m: token embeddings of width word_embed_proj_dim, projected to hidden, no bias.
    if (embed_dim_ != s_.hidden) b.linear("project_in", embed_dim_, s_.hidden, false);
    if (s_.max_positions > 0) b.memory_op("add_positions", add_bytes(s_.hidden, 2));
    if (hidden_dropout_) b.memory_op("embed_dropout", dropout_bytes(s_.hidden));
    return b.take();
  }

  Layer block(int64_t i) {
    const std::string prefix = n_.block + "." + std::to_string(i);
    const std::string p = prefix + ".";
    const bool moe = s_.moe_layer(i);
    LayerBuilder b(prefix, LayerKind::kBlock, /*checkpointed=*/true);
    b.rms_code = s_.rms_code;
    if (moe) b.set_moe_block();
    // Post-add norms (OPT-350m): pre_norm false without sublayer-output norms.
    const bool post_add = !s_.pre_norm && !s_.post_sublayer_norm;

    if (s_.pre_norm) b.norm(p + n_.norm1, s_.hidden, s_.norm);
    if (s_.mla()) {
      latent_attention(b, p);
    } else {
      attention(b, p);
    }
    const bool glm = s_.glm_norm_names;
    if (s_.post_sublayer_norm) {
      b.norm(p + (glm ? "post_self_attn_layernorm" : "post_attention_layernorm"), s_.hidden,
             s_.norm);
    }
    if (hidden_dropout_) b.memory_op("attn_dropout", dropout_bytes(s_.hidden));

    if (s_.parallel_residual) {
      // GPT-NeoX / GPT-J / Falcon: x + attn(norm1(x)) + mlp(norm2(x)) (norm2 = norm1 with one
      // norm), one three-way add at the end.
      if (s_.parallel_norms == 2) b.norm(p + n_.norm2, s_.hidden, s_.norm);
      mlp(b, p, moe);
      if (hidden_dropout_) b.memory_op("mlp_dropout", dropout_bytes(s_.hidden));
      b.memory_op("residual", add_bytes(s_.hidden, 3));
      return b.take();
    }
    b.memory_op("attn_residual", add_bytes(s_.hidden, 2));
    if (post_add) b.norm(p + n_.norm1, s_.hidden, s_.norm);
    if (s_.pre_norm) {
      // Gemma-2's sandwich names the norm before the MLP pre_feedforward_layernorm.
      b.norm(p + (s_.post_sublayer_norm && !glm ? std::string("pre_feedforward_layernorm")
                                                : n_.norm2),
             s_.hidden, s_.norm);
    }
    mlp(b, p, moe);
    if (s_.post_sublayer_norm) {
      b.norm(p + (glm ? "post_mlp_layernorm" : "post_feedforward_layernorm"), s_.hidden,
             s_.norm);
    }
    if (hidden_dropout_) b.memory_op("mlp_dropout", dropout_bytes(s_.hidden));
    b.memory_op("mlp_residual", add_bytes(s_.hidden, 2));
    if (post_add) b.norm(p + n_.norm2, s_.hidden, s_.norm);
    return b.take();
  }

  // Multi-head attention with grouped or multi-query keys and values. AutoTP (TpSplit): the
  // q/k/v projections are column-split, the output projection row-split (the tensor-parallel
  // rules of models/tensor_parallel.h), and what runs between them works on heads/tp.
  void attention(LayerBuilder& b, const std::string& p) {
    if (!n_.qkv.empty()) {
      b.linear(p + n_.qkv, s_.hidden, q_dim_ + 2 * kv_dim_, qkv_bias_, TpSplit::kColumn);
    } else {
      b.linear(p + n_.q, s_.hidden, q_dim_, qkv_bias_, TpSplit::kColumn);
      b.linear(p + n_.k, s_.hidden, kv_dim_, qkv_bias_, TpSplit::kColumn);
      b.linear(p + n_.v, s_.hidden, kv_dim_, qkv_bias_, TpSplit::kColumn);
    }
    // Qwen3Attention: q_norm, k_norm = RMSNorm(head_dim) applied per head; Olmo2Attention:
    // RMSNorm(heads * head_dim) and RMSNorm(kv_heads * head_dim) over the whole projections.
    if (s_.qk_norm != QkNorm::kNone) {
      const bool per_head = s_.qk_norm == QkNorm::kPerHead;
      b.norm(p + "self_attn.q_norm", per_head ? s_.head_dim : q_dim_, s_.norm, q_dim_);
      b.split_last_op();
      b.norm(p + "self_attn.k_norm", per_head ? s_.head_dim : kv_dim_, s_.norm, kv_dim_);
      b.split_last_op();
    }
    if (s_.max_positions == 0) b.rotary(q_dim_ + kv_dim_, s_.qwen_names);
    b.attention("attention", s_.heads, s_.head_dim, s_.head_dim);
    if (s_.attention_sinks) {
      // GptOssAttention.sinks: a parameter of the attention module itself, one per head.
      b.add_module(Module{p + "self_attn", {{p + "self_attn.sinks", s_.heads}}, ""});
    }
    b.linear(p + n_.out, q_dim_, s_.hidden, out_bias_, TpSplit::kRow);
  }

  // DeepseekV2Attention (transformers modeling_deepseek_v2.py): queries through q_proj, or the
  // q_lora_rank bottleneck q_a_proj -> q_a_layernorm -> q_b_proj; kv_a_proj_with_mqa makes the
  // kv_lora_rank latent and one qk_rope_head_dim rotary key shared by all heads; kv_a_layernorm,
  // then kv_b_proj expands the latent to each head's non-rotary key and value. q_a_proj,
  // kv_a_proj_with_mqa and o_proj have attention_bias; q_proj, q_b_proj, kv_b_proj never.
  void latent_attention(LayerBuilder& b, const std::string& p) {
    const int64_t qk_head = s_.qk_nope_head_dim + s_.qk_rope_head_dim;
    const int64_t a = s_.heads;
    if (s_.q_lora_rank > 0) {
      b.linear(p + "self_attn.q_a_proj", s_.hidden, s_.q_lora_rank, qkv_bias_);
      b.norm(p + "self_attn.q_a_layernorm", s_.q_lora_rank, Norm::kRmsNorm);
      b.linear(p + "self_attn.q_b_proj", s_.q_lora_rank, a * qk_head, false);
    } else {
      b.linear(p + "self_attn.q_proj", s_.hidden, a * qk_head, false);
    }
    b.linear(p + "self_attn.kv_a_proj_with_mqa", s_.hidden,
             s_.kv_lora_rank + s_.qk_rope_head_dim, qkv_bias_);
    b.norm(p + "self_attn.kv_a_layernorm", s_.kv_lora_rank, Norm::kRmsNorm);
    b.linear(p + "self_attn.kv_b_proj", s_.kv_lora_rank,
             a * (s_.qk_nope_head_dim + s_.v_head_dim), false);
    // Rotary on every head's rope part of the query and on the one shared rope key.
    b.rotary(a * s_.qk_rope_head_dim + s_.qk_rope_head_dim, false);
    b.attention("attention", a, qk_head, s_.v_head_dim);
    b.linear(p + "self_attn.o_proj", a * s_.v_head_dim, s_.hidden, out_bias_);
  }

  void mlp(LayerBuilder& b, const std::string& p, bool moe) {
    if (moe) {
      internal::add_moe_mlp(b, s_, p);
      return;
    }
    // AutoTP: the input projections column-split, the output projection row-split.
    const double f = static_cast<double>(s_.ffn);
    if (s_.activation == Activation::kSwiglu) {
      if (!n_.gate_up.empty()) {
        b.linear(p + n_.gate_up, s_.hidden, 2 * s_.ffn, mlp_bias_, TpSplit::kColumn);
      } else {
        // In forward order (ZeRO-3 fetches in it): QWenMLP runs w1 (up) before w2 (gate).
        if (s_.qwen_names) b.linear(p + n_.up, s_.hidden, s_.ffn, mlp_bias_, TpSplit::kColumn);
        b.linear(p + n_.gate, s_.hidden, s_.ffn, mlp_bias_, TpSplit::kColumn);
        if (!s_.qwen_names) b.linear(p + n_.up, s_.hidden, s_.ffn, mlp_bias_, TpSplit::kColumn);
      }
      b.memory_op("silu", 4.0 * f);
      b.split_last_op();
      b.memory_op("gate_mul", 6.0 * f);
      b.split_last_op();
      auto& ops = b.layer().ops;
      internal::set_liger_swiglu(ops[ops.size() - 2], ops.back(), s_.ffn);
      b.linear(p + n_.down, s_.ffn, s_.hidden, mlp_bias_, TpSplit::kRow);
      return;
    }
    b.linear(p + n_.fc1, s_.hidden, s_.ffn, mlp_bias_, TpSplit::kColumn);
    b.memory_op(s_.activation == Activation::kRelu ? "relu" : "gelu", 4.0 * f);
    b.split_last_op();
    if (s_.activation == Activation::kGelu && s_.gelu_formula) {
      internal::set_gelu_formula(b.layer().ops.back(), s_.ffn);
    }
    b.linear(p + n_.fc2, s_.ffn, s_.hidden, mlp_bias_, TpSplit::kRow);
  }


  Layer lm_head() {
    LayerBuilder b("lm_head", LayerKind::kLmHead, false);
    if (embed_dim_ != s_.hidden) b.linear("project_out", s_.hidden, embed_dim_, false);
    Module head;
    head.name = n_.head;
    if (s_.tied_embeddings) {
      // The same V x e tensor as the token embedding: listed so that ZeRO-3 gathers it again
      // here, counted once (Model skips modules with tied_to).
      head.params.push_back({n_.tokens + ".weight", s_.vocab * embed_dim_});
      head.tied_to = n_.tokens;
    } else {
      head.params.push_back({n_.head + ".weight", s_.vocab * embed_dim_});
      if (s_.lm_head_bias) head.params.push_back({n_.head + ".bias", s_.vocab});
    }
    int index = b.add_module(std::move(head));
    b.gemm(n_.head, s_.vocab, embed_dim_, index);
    // Cross-entropy as Hugging Face computes it (estimate): read the 16-bit logits (2V), write
    // the fp32 copy (4V), read it (4V) and write the fp32 log-probabilities (4V): 14V.
    b.memory_op("cross_entropy", 14.0 * static_cast<double>(s_.vocab));
    return b.take();
  }

  const ModelShape& s_;
  ModuleNames n_;
  int64_t q_dim_ = 0, kv_dim_ = 0, embed_dim_ = 0;
  bool qkv_bias_ = false, out_bias_ = false, mlp_bias_ = false, hidden_dropout_ = false;
};

}  // namespace

Model build_model(const ModelShape& shape, const std::string& where) {
  ModelShape s = normalized(shape, where);
  std::vector<Layer> layers;
  if (s.family == Family::kMlp) {
    for (int64_t i = 0; i < s.layers; ++i) layers.push_back(mlp_layer(s, i));
  } else {
    layers = TransformerBuilder(s).build();
  }
  // Each size is bounded (kMaxWidth, kMaxLayers, ...), but their product is not: sum in double
  // so that an absurd shape is refused before an int64 count overflows.
  double params = 0;
  for (const Layer& layer : layers) {
    for (const Module& m : layer.modules) {
      for (const Param& p : m.params) params += static_cast<double>(p.numel);
    }
  }
  if (params > internal::kMaxModelParams) {
    throw InputError(where, strformat("the model would have %.3g parameters; zplan plans models "
                                      "of up to %.0e",
                                      params, internal::kMaxModelParams));
  }
  return Model(std::move(s), std::move(layers));
}

}  // namespace zplan::models
