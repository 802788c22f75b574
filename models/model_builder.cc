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
#include "models/model.h"
#include "models/model_internal.h"
#include "models/module_names.h"

namespace zplan::models {

namespace {

using internal::kMaxLayers;
using internal::kMaxSeqLen;
using internal::kMaxVocab;
using internal::kMaxWidth;
using internal::ModuleNames;
using internal::module_names;

// Appends modules and ops to one layer.
class LayerBuilder {
 public:
  LayerBuilder(std::string name, LayerKind kind, bool checkpointed) {
    layer_.name = std::move(name);
    layer_.kind = kind;
    layer_.checkpointed_unit = checkpointed;
  }

  int add_module(Module module) {
    layer_.modules.push_back(std::move(module));
    return static_cast<int>(layer_.modules.size()) - 1;
  }

  // nn.Linear(in, out): weight out x in (GPT-2's Conv1D stores it transposed, same count), and
  // a GEMM with n = out, k = in. The weight is the module's first parameter, the bias its second
  // (tensor_parallel_shard splits them by `tp`).
  int linear(const std::string& name, int64_t in, int64_t out, bool bias,
             TpSplit tp = TpSplit::kReplicated) {
    Module m{name, {{name + ".weight", out * in}}, ""};
    if (bias) m.params.push_back({name + ".bias", out});
    int index = add_module(std::move(m));
    gemm(name, out, in, index);
    layer_.ops.back().tp = tp;
    return index;
  }

  void gemm(const std::string& name, int64_t n, int64_t k, int module) {
    ComputeOp op;
    op.name = name;
    op.kind = OpKind::kGemm;
    op.n = n;
    op.k = k;
    op.module = module;
    layer_.ops.push_back(op);
  }

  // The RMSNorm code of the family (ModelShape::rms_code) its norms run.
  RmsNormCode rms_code = RmsNormCode::kLlama;

  // Marks the last op as working on tensor-parallel-split activations (TpSplit::kSplit).
  void split_last_op() { layer_.ops.back().tp = TpSplit::kSplit; }

  // LayerNorm (weight, bias): native_layer_norm, one kernel that reads and writes one 16-bit
  // row, 4h bytes. RMSNorm (weight): Hugging Face's eager chain (internal::set_rms_norm).
  void norm(const std::string& name, int64_t width, Norm kind) { norm(name, width, kind, width); }

  // An embedding table rows x width; the lookup reads the int64 id and copies one row: 4w + 8.
  int embedding(const std::string& name, int64_t rows, int64_t width) {
    int index = add_module(Module{name, {{name + ".weight", rows * width}}, ""});
    memory_op(name, 4.0 * static_cast<double>(width) + 8.0, index);
    return index;
  }

  void memory_op(const std::string& name, double bytes_per_token, int module = -1) {
    ComputeOp op;
    op.name = name;
    op.kind = OpKind::kMemoryBound;
    op.bytes_per_token = bytes_per_token;
    op.module = module;
    layer_.ops.push_back(op);
  }

  void attention(const std::string& name, int64_t heads, int64_t head_dim, int64_t value_dim) {
    ComputeOp op;
    op.name = name;
    op.kind = OpKind::kAttention;
    op.tp = TpSplit::kSplit;  // AutoTP: each rank attends with its heads/tp
    op.heads = heads;
    op.head_dim = head_dim;
    op.value_dim = value_dim == head_dim ? 0 : value_dim;
    layer_.ops.push_back(op);
  }

  // A norm whose kernels read and write `row` elements per token (q/k norms: the whole
  // projection) while its weight has `width` elements.
  void norm(const std::string& name, int64_t width, Norm kind, int64_t row) {
    Module m{name, {{name + ".weight", width}}, "", /*norm=*/true};
    if (kind == Norm::kLayerNorm) m.params.push_back({name + ".bias", width});
    int index = add_module(std::move(m));
    if (kind == Norm::kLayerNorm) {
      memory_op(name, 4.0 * static_cast<double>(row), index);
      return;
    }
    memory_op(name, 0, index);
    internal::set_rms_norm(layer_.ops.back(), row, rms_code);
  }

  // Rotary position embedding on `width` elements of the queries and keys per token
  // (internal::rotary_op).
  void rotary(int64_t width, bool qwen_v1) {
    layer_.ops.push_back(internal::rotary_op(width, qwen_v1));
  }

  void set_moe_block() { layer_.moe_block = true; }
  Layer& layer() { return layer_; }

  Layer take() { return std::move(layer_); }

 private:
  Layer layer_;
};

// Bytes per token of the elementwise kernels (16-bit elements):
//   dropout:      read x, write y and a 1-byte mask        2w + 2w + w = 5w
//   residual add: read two inputs, write the sum           6w (a three-way add: 8w)
//   GeLU / ReLU / SiLU: read and write one element         4w
//   SwiGLU product: read silu(gate) and up, write          6w
//   rotary:       read and write Q and K                   4 * (q_dim + kv_dim)
double dropout_bytes(int64_t w) { return 5.0 * static_cast<double>(w); }
double add_bytes(int64_t w, int inputs) { return 2.0 * static_cast<double>(w) * (inputs + 1); }

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
      experts(b, p);
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

  // The sparse MoE block (MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock, Qwen3MoeSparseMoeBlock,
  // DeepseekV2Moe, DeepseekV3MoE): the router (E x h), then the experts in transformers 5's
  // layout (fused_experts: fused_experts() below) or, as Hugging Face transformers 4.x builds
  // them, with the router an nn.Linear(h, E) and
  // per expert an nn.Module of three Linears (gate_proj, up_proj, down_proj; Mixtral's
  // MixtralBlockSparseTop2MLP names them w1, w3, w2, and the block block_sparse_moe, as PEFT's
  // target_modules and leaf_module's names see them), and the shared expert's; no biases. Each
  // Linear is a module of its own (ZeRO-3 gathers it alone) unless ZeRO-3 treats the block as a
  // leaf, which gathers them all at once: Module::moe_block marks them (sim/zero_sizes.cc,
  // docs/models.md "Mixture of experts").
  //
  // The forward is the modeling code's Python loop over the experts (modeling_mixtral.py
  // MixtralSparseMoeBlock.forward): the router's softmax and top-k, then for each expert the
  // torch.where over its mask, the gather of its rows, act(gate(x)) * up(x), down, the routing
  // weight's multiply and index_add_ into the output. The experts are balanced: each runs
  // experts_per_token / experts of the tokens (load imbalance is not modelled).
  void experts(LayerBuilder& b, const std::string& p) {
    const int64_t h = s_.hidden;
    const std::string m = p + s_.moe_block_name;
    const bool mixtral = s_.moe_block_class_name() == "MixtralSparseMoeBlock";
    const std::string gate_name = mixtral ? "w1" : "gate_proj";
    const std::string up_name = mixtral ? "w3" : "up_proj";
    const std::string down_name = mixtral ? "w2" : "down_proj";
    const double k = static_cast<double>(s_.experts_per_token);
    const double hd = static_cast<double>(h);
    auto add = [&](const std::string& name, int64_t numel) {
      Module mod{name, {{name + ".weight", numel}}, ""};
      mod.moe_block = true;
      return b.add_module(std::move(mod));
    };
    if (s_.gpt_oss_experts) {
      // GptOssTopKRouter: F.linear with its weight and bias, top-k, softmax over the k.
      Module router{m + ".router",
                    {{m + ".router.weight", s_.experts * h}, {m + ".router.bias", s_.experts}},
                    ""};
      router.moe_block = true;
      b.gemm(m + ".router", s_.experts, h, b.add_module(std::move(router)));
    } else if (s_.dense_experts) {
      // Llama4Router: an nn.Linear(h, E) subclass (a plain nn.Linear before 4.54), top-k of the
      // logits, sigmoid of the kept ones.
      b.gemm(m + ".router", s_.experts, h, add(m + ".router", s_.experts * h));
    } else {
      b.gemm(m + ".gate", s_.experts, h, add(m + ".gate", s_.experts * h));
    }
    b.layer().ops.back().peft_linear = s_.router_linear;
    // Softmax in fp32, top-k, renormalize, cast, the expert mask (one_hot) and which experts it
    // hits: read the 16-bit logits, write fp32 probabilities and the k chosen weights and
    // indices (estimate); and the zeroed output the experts add into (2h).
    b.memory_op("router_topk", 6.0 * static_cast<double>(s_.experts) + 12.0 * k + 2.0 * hd);
    if (s_.fused_experts) {
      fused_experts(b, m);
    } else {
      expert_loop(b, m, gate_name, up_name, down_name, add);
    }
    shared_experts(b, m, add);
  }

  // transformers 5's <Type>Experts (modeling_mixtral.py MixtralExperts, and the same class in
  // every MoE model): one module holding gate_up_proj [E, 2f, h] and down_proj [E, h, f], run by
  // integrations/moe.py grouped_mm_experts_forward, the default experts_implementation: the
  // routed rows gathered (hidden_states[token_idx]) and sorted by expert (argsort, histc,
  // cumsum for the offsets), one torch._grouped_mm for gate and up, chunk, act(gate) * up, one
  // for down, the routing weight's multiply, the inverse permutation and index_add_. ZeRO-3
  // gathers the two tensors as one module, whichever experts the tokens reach.
  void fused_experts(LayerBuilder& b, const std::string& m) {
    const int64_t h = s_.hidden, fe = s_.expert_ffn;
    const double k = static_cast<double>(s_.experts_per_token);
    const double hd = static_cast<double>(h), fed = static_cast<double>(fe);
    const std::string x = m + ".experts";
    Module mod{x,
               {{x + ".gate_up_proj", s_.experts * 2 * fe * h},
                {x + ".down_proj", s_.experts * h * fe}},
               ""};
    if (s_.gpt_oss_experts) {
      mod.params.push_back({x + ".gate_up_proj_bias", s_.experts * 2 * fe});
      mod.params.push_back({x + ".down_proj_bias", s_.experts * h});
    }
    mod.moe_block = true;
    const int experts = b.add_module(std::move(mod));
    if (s_.dense_experts) {
      dense_experts(b, x, experts);
      return;
    }
    // chunk (views), act(gate) (read f, write f) and the product (read two, write one); GPT-OSS:
    // the gate_up bias (read and write 2f), two clamps, the scaled sigmoid, its product, up + 1
    // and the last product, each reading and writing f (estimate).
    const double act = s_.gpt_oss_experts ? 40.0 * fed : 10.0 * fed;
    // The down bias (GPT-OSS): read and write h.
    const double down_bias = s_.gpt_oss_experts ? 4.0 * hd : 0.0;
    if (s_.expert_loop) {
      // The loop over the experts reached (GptOssExperts.forward of transformers 4.x): per
      // expert the mask's torch.where, the gather of its rows, a GEMM on its slice of
      // gate_up_proj, the gate, a GEMM on its slice of down_proj, the routing weight and
      // index_add_, all on the one module ZeRO-3 gathers.
      const double rows = k / static_cast<double>(s_.experts);
      for (int64_t e = 0; e < s_.experts; ++e) {
        const std::string y = x + "." + std::to_string(e) + ".";
        b.memory_op(y + "route", 8.0 * k);
        b.memory_op(y + "dispatch", 4.0 * hd * rows);
        expert_gemm(b, x + ".gate_up_proj", 2 * fe, h, experts, rows);
        b.layer().ops.back().peft_linear = false;
        b.memory_op(y + "act", act * rows);
        expert_gemm(b, x + ".down_proj", h, fe, experts, rows);
        b.layer().ops.back().peft_linear = false;
        b.memory_op(y + "combine", (10.0 * hd + down_bias) * rows);
      }
      return;
    }
    // argsort of the k routed slots and of its permutation (int64 keys and indices, read and
    // written), histc and cumsum over them (estimate): 40 bytes per routed slot.
    b.memory_op(x + ".sort", 40.0 * k);
    // hidden_states[token_idx], then [perm]: read and write h per routed row, twice.
    b.memory_op(x + ".dispatch", 8.0 * hd * k);
    all_experts_gemm(b, x + ".gate_up_proj", 2 * fe, h, experts, k, false);
    b.memory_op(x + ".act", act * k);
    all_experts_gemm(b, x + ".down_proj", h, fe, experts, k, false);
    // The routing weight's multiply (read and write h), out[inv_perm] (read and write h) and
    // index_add_ into the output (read the row and the output row, write it): 14h per row.
    b.memory_op(x + ".combine", (14.0 * hd + down_bias) * k);
  }

  // Llama4TextMoe.forward (modeling_llama4.py, the same in every release): the tokens repeated
  // once per expert (hidden_states.repeat, E*h written a token), each copy scaled by its
  // sigmoid score (read and write E*h), Llama4TextExperts' bmm of [E, T, h] with gate_up_proj
  // [E, h, 2f], chunk, up * act(gate), the bmm with down_proj [E, f, h], and the sum over the E
  // outputs into the shared expert's (read E*h, read and write h). Every expert computes every
  // token: E GEMMs of T rows, one kernel each way.
  void dense_experts(LayerBuilder& b, const std::string& x, int experts) {
    const int64_t h = s_.hidden, fe = s_.expert_ffn;
    const double e = static_cast<double>(s_.experts);
    const double hd = static_cast<double>(h), fed = static_cast<double>(fe);
    b.memory_op(x + ".dispatch", 6.0 * hd * e + 2.0 * hd);
    all_experts_gemm(b, x + ".gate_up_proj", 2 * fe, h, experts, e, true);
    b.memory_op(x + ".act", 10.0 * fed * e);
    all_experts_gemm(b, x + ".down_proj", h, fe, experts, e, true);
    b.memory_op(x + ".combine", 2.0 * hd * e + 4.0 * hd);
  }

  // One kernel over all of a module's experts: torch._grouped_mm over the routed rows sorted by
  // expert (rows_per_token k), or Llama 4's torch.bmm over every token's E copies (batched, E).
  // Adapters never wrap the 3D expert tensors.
  void all_experts_gemm(LayerBuilder& b, const std::string& name, int64_t n, int64_t kdim,
                        int module, double rows_per_token, bool batched) {
    b.gemm(name, n, kdim, module);
    ComputeOp& op = b.layer().ops.back();
    op.token_factor = rows_per_token;
    op.groups = s_.experts;
    op.batched = batched;
    if (batched) {
      op.model_flops_fraction =
          static_cast<double>(s_.experts_per_token) / static_cast<double>(s_.experts);
    }
    op.peft_linear = false;
  }

  // transformers 4.x: per expert an nn.Module of three Linears, run by the modeling code's loop.
  template <typename Add>
  void expert_loop(LayerBuilder& b, const std::string& m, const std::string& gate_name,
                   const std::string& up_name, const std::string& down_name, Add& add) {
    const int64_t h = s_.hidden, fe = s_.expert_ffn;
    const double k = static_cast<double>(s_.experts_per_token);
    const double hd = static_cast<double>(h), fed = static_cast<double>(fe);
    const double rows = k / static_cast<double>(s_.experts);  // an expert's rows per token
    for (int64_t e = 0; e < s_.experts; ++e) {
      const std::string x = m + ".experts." + std::to_string(e) + ".";
      const int gate = add(x + gate_name, fe * h);
      const int up = add(x + up_name, fe * h);
      const int down = add(x + down_name, h * fe);
      // torch.where over its row of the int64 mask (8 bytes per routed slot), then the gather
      // of its tokens' hidden states (read and write h each).
      b.memory_op(x + "route", 8.0 * k);
      b.memory_op(x + "dispatch", 4.0 * hd * rows);
      expert_gemm(b, x + gate_name, fe, h, gate, rows);
      b.memory_op(x + "silu", 4.0 * fed * rows);
      expert_gemm(b, x + up_name, fe, h, up, rows);
      b.memory_op(x + "gate_mul", 6.0 * fed * rows);
      expert_gemm(b, x + down_name, h, fe, down, rows);
      // The routing weight's multiply (read and write h) and index_add_ into the output (read
      // the row and the output row, write it): 10h per row.
      b.memory_op(x + "combine", 10.0 * hd * rows);
    }
  }

  // The always-on shared expert: Qwen2-MoE's shared_expert with its sigmoid shared_expert_gate,
  // DeepSeek's and GLM-4.5's shared_experts (DeepseekV2Moe / DeepseekV3MoE / Glm4MoeMoE:
  // n_shared_experts MLPs fused into one of n * width), nn.Linears in both layouts.
  template <typename Add>
  void shared_experts(LayerBuilder& b, const std::string& m, Add& add) {
    const int64_t h = s_.hidden, fs = s_.shared_expert_ffn;
    const double hd = static_cast<double>(h);
    if (fs > 0) {
      const double fsd = static_cast<double>(fs);
      // Qwen2-MoE names its gated one shared_expert, Llama 4 its ungated one; DeepSeek and
      // GLM-4.5 shared_experts.
      const bool one = s_.shared_expert_gate || s_.dense_experts;
      const std::string x = m + (one ? ".shared_expert." : ".shared_experts.");
      b.gemm(x + "gate_proj", fs, h, add(x + "gate_proj", fs * h));
      b.memory_op("shared_silu", 4.0 * fsd);
      b.gemm(x + "up_proj", fs, h, add(x + "up_proj", fs * h));
      b.memory_op("shared_gate_mul", 6.0 * fsd);
      b.gemm(x + "down_proj", h, fs, add(x + "down_proj", h * fs));
      if (s_.shared_expert_gate) {
        b.gemm(m + ".shared_expert_gate", 1, h, add(m + ".shared_expert_gate", h));
        b.memory_op("shared_sigmoid_mul", 6.0 * hd);
      }
      b.memory_op("shared_add", add_bytes(h, 2));
    }
  }

  // One routed expert's GEMM: `rows` of its rows per token of the micro-batch.
  void expert_gemm(LayerBuilder& b, const std::string& name, int64_t n, int64_t k, int module,
                   double rows) {
    b.gemm(name, n, k, module);
    b.layer().ops.back().token_factor = rows;
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
