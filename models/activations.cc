// Model::layer_activations: the activation bytes of one layer for b sequences of s tokens.
//
// Notation: T = s*b tokens, h hidden, a heads, d head_dim, g kv heads, A = a*d (query width),
// G = g*d (key/value width), f ffn, V vocab, e token-embedding width (h except OPT-350m),
// D = dtype bytes of an activation element (2 for 16-bit, 4 for fp32). Dropout masks are one
// byte per element, flash-attention softmax statistics are fp32 (4 bytes), token ids and labels
// int64 (8 bytes) whatever D is.
//
// Transformer block, stored from forward to backward (Korthikanti et al. 2022, "Reducing
// Activation Recomputation in Large Transformer Models", §4.1; reference/deepspeed_internals.md
// §6). Each term is a tensor some backward needs:
//   norm inputs          2h   (norm1 and norm2 each keep their input; h with a parallel
//                              residual, where both norms read the same block input)
//   q/k/v GEMM input     h    (norm1 output)
//   Q, K, V              A + 2G (QK^T needs Q and K, AV needs V; after rotary)
//   out-proj input       A    (the attention output, also what flash attention keeps as O)
//   MLP input            h    (norm2 output)
//   MLP, GeLU:           2f   (GeLU input, fc2 input = GeLU output; transformers' tanh formula,
//                              gelu_new, 3f more: below)
//   MLP, ReLU:           f    (ReLU backward needs only its output, which is the fc2 input)
//   MLP, SwiGLU:         4f   (gate, up, silu(gate), the product = down_proj input)
//   -> D*T*(that sum) bytes, plus
//   hidden dropout masks 2*T*h bytes (after the out-projection and after the MLP; GPT, OPT,
//                              NeoX with dropout; Llama blocks have none)
//   attention, no flash  D*a*s*s*b (softmax output), and with attention dropout a*s*s*b mask +
//                              D*a*s*s*b dropped probabilities; the Llama family's eager code
//                              upcasts the softmax to fp32 and repeats K and V for GQA (below)
//   attention, flash     4*a*s*b  (fp32 logsumexp per row and head; scores never stored)
// A GPT block (A = G = h, f = 4h, GeLU, dropout, D = 2): T*h*(2*(2+1+3+1+1+8) + 2) =
// 34*T*h, plus 5*a*s*s*b without flash: Korthikanti's s*b*h*(34 + 5*a*s/h).
// A Llama block (no dropout, D = 2, A = h): 2*T*(2h + h + h + 2G + h + h + 4f) =
// 2*T*(6h + 2G + 4f), plus 4*a*s*b with flash attention; eager attention stores
// 2*T*(6h + 2A + 4f) (K and V repeated to the query width) + (4 + 2)*a*s*s*b (fp32 softmax output
// and its 16-bit copy).
//
// RMSNorm models without Liger run Hugging Face's RMSNorm (LlamaRMSNorm.forward in
// transformers/models/llama/modeling_llama.py, copied by Mistral, Qwen2/3, OLMo-2, DeepSeek):
//   hidden_states = hidden_states.to(torch.float32)
//   variance = hidden_states.pow(2).mean(-1, keepdim=True)      # pow saves the fp32 input
//   hidden_states = hidden_states * torch.rsqrt(variance + eps)  # mul saves it again (same tensor)
//   return self.weight * hidden_states.to(input_dtype)           # saves the D-byte normalized x
// so each norm keeps 4 + D bytes per input element where the count above charges the D-byte
// input: 4 more per element (rms_upcast_bytes), whatever D is (in fp32 the cast is the input
// itself and the normalized copy is 4 bytes); with the norm's weight frozen (LoRA) the weight's
// multiply saves nothing, so 4 - D more. Gemma's RMSNorm (output * (1.0 + weight.float()) before
// type_as) and OLMo-2's ((weight * hidden_states).to(input_dtype)) apply the weight to the fp32
// normalized tensor, which its multiply saves: 8 - D more with a trained weight. Liger's RMSNorm (LigerRMSNorm) keeps its D-byte input
// and one fp32 rstd per row, the count above.
//
// Everything below that is not a stored tensor of the paper's count is an estimate (reference §8
// lists what is unconfirmed); docs/models.md has the same derivations.
#include <algorithm>
#include <cassert>

#include "models/model.h"

namespace zplan::models {

namespace {

// Whether every norm of the layer trains its weight (LoRA freezes them with the other base
// weights).
bool norms_train(const Layer& layer) {
  for (const Module& mod : layer.modules) {
    if (!mod.norm) continue;
    for (const Param& p : mod.params) {
      if (!p.trainable) return false;
    }
  }
  return true;
}

// Bytes an RMSNorm keeps per input element beyond the D-byte input the counts charge: Hugging
// Face's RMSNorm keeps the fp32 copy (4) and, when its weight trains, the D-byte normalized
// tensor (PyTorch saves a product's operand only for the other operand's gradient): 4 + D - D,
// or 4 - D with a frozen weight. 0 for Liger's kernel and for LayerNorm (native_layer_norm keeps
// its input and per-row fp32 mean and rstd).
double rms_upcast_bytes(const ModelShape& m, const Layer& layer, const ActivationOptions& options) {
  if (m.norm != Norm::kRmsNorm || options.fused_rmsnorm) return 0.0;
  const double d = static_cast<double>(options.dtype_bytes);
  if (!norms_train(layer)) return 4.0 - d;
  // Gemma's and OLMo-2's norms multiply the weight into the fp32 normalized tensor, which that
  // multiply saves (4 bytes, not D): 4 + 4 - D.
  return m.rms_code == RmsNormCode::kLlama ? 4.0 : 8.0 - d;
}

}  // namespace

LayerActivations Model::layer_activations(size_t index, int64_t seq, int64_t batch,
                                          const ActivationOptions& options) const {
  assert(index < layers_.size());
  assert(options.dtype_bytes > 0);
  const Layer& layer = layers_[index];
  const ModelShape& m = shape_;
  // Fine-tuning (models/finetune.h): below the first trainable layer autograd records nothing,
  // so nothing is stored and there is no backward to need a workspace.
  if (layer.no_grad) return LayerActivations{};
  const double s = static_cast<double>(seq);
  const double tokens = s * static_cast<double>(batch);
  const double dt = options.dtype_bytes;
  const double h = static_cast<double>(m.hidden);
  LayerActivations out;

  switch (layer.kind) {
    case LayerKind::kLinear: {
      // MLP stack (the executor allocates exactly this): the Linear keeps its input, the ReLU
      // its output (no ReLU after the last layer); the transient is the gradient arriving and
      // the gradient leaving, one T x h tensor each.
      const bool last = index + 1 == layers_.size();
      out.stored_bytes = dt * tokens * h * (last ? 1 : 2);
      out.checkpoint_bytes = dt * tokens * h;
      out.workspace_bytes = 2 * dt * tokens * h;
      return out;
    }

    case LayerKind::kEmbedding: {
      // Backward of a lookup needs the token ids (8T); OPT-350m's project_in keeps its input
      // (D*T*e); a hidden dropout keeps its mask (T*h). Workspace (estimate): the gradient of
      // the output arriving from the first block, and of project_in's input.
      const double e = m.embed_proj_dim > 0 ? static_cast<double>(m.embed_proj_dim) : h;
      const bool projected = e != h;
      const bool dropout = m.dropout && m.family != Family::kLlama;
      out.stored_bytes = 8 * tokens + (projected ? dt * tokens * e : 0) + (dropout ? tokens * h : 0);
      out.checkpoint_bytes = out.stored_bytes;
      out.workspace_bytes = dt * tokens * (h + (projected ? e : 0));
      return out;
    }

    case LayerKind::kFinalNorm:
      // The norm keeps its input (and Hugging Face's RMSNorm its fp32 copy, rms_upcast_bytes);
      // workspace (estimate): incoming and outgoing gradients.
      out.stored_bytes = (dt + rms_upcast_bytes(m, layer, options)) * tokens * h;
      out.checkpoint_bytes = out.stored_bytes;
      out.workspace_bytes = 2 * dt * tokens * h;
      return out;

    case LayerKind::kLmHead: {
      // Stored: the GEMM inputs (project_out's h and lm_head's e, or one h), the fp32
      // log-probabilities cross-entropy's backward reads (4*T*V) and the int64 labels (8T).
      // The 4*T*V term: Hugging Face's loss (ForCausalLMLoss in transformers/loss/loss_utils.py,
      // the loss_function of every *ForCausalLM) upcasts the logits (`logits = logits.float()`)
      // and calls nn.functional.cross_entropy, whose log_softmax saves its fp32 output for
      // backward; the 16-bit logits and the fp32 copy are freed once it is computed.
      // Workspace, the larger of the loss's two transient peaks over the stored 4*T*V:
      //   forward: the D-byte logits and their fp32 copy (D + 4 per element; one fp32 tensor,
      //     4, when D = 4) alive while log_softmax writes its output;
      //   backward: log_softmax's backward (LogSoftmaxBackward0) reads the gradient of the
      //     log-probabilities (fp32, 4V, what nll_loss's backward wrote) and writes the gradient
      //     of the fp32 logits (4V): 8*T*V. The autograd engine releases a node's input gradient
      //     and its saved tensors once the node has run (torch/csrc/autograd/engine.cpp,
      //     evaluate_function; saved variables are freed unless retain_graph), so the cast's
      //     backward (ToCopyBackward0), which writes the D-byte gradient, runs with only the 4V
      //     gradient left: 4 + D < 8 more, never the 4 + 4 + D of the three gradients at once.
      // With D = 2 that is max(6, 8) = 8*T*V, a peak of 12*T*V with the stored log-probabilities.
      const double e = m.embed_proj_dim > 0 ? static_cast<double>(m.embed_proj_dim) : h;
      const double v = static_cast<double>(m.vocab);
      // A frozen head (LoRA freezes every base weight) needs no weight gradient: its GEMMs'
      // inputs are not saved (PyTorch saves a matmul operand only for the other's gradient) and
      // Liger allocates no grad_weight for a weight without requires_grad.
      bool frozen = true;
      for (const ComputeOp& op : layer.ops) {
        if (op.kind == OpKind::kGemm && !op.frozen_weight) frozen = false;
      }
      const double keep_inputs = frozen ? 0 : 1;
      const double projected_in = e != h ? keep_inputs * dt * tokens * h : 0;  // project_out's
      if (options.fused_loss) {
        // Fused linear + cross-entropy (Liger's LigerFusedLinearCrossEntropyFunction.forward,
        // liger_kernel/ops/fused_linear_cross_entropy.py): the forward walks the tokens in chunks
        // of about T*e/V rows, computes each chunk's logits, their softmax gradient in place and
        // the chunk's contributions to the gradients of the input and of the weight; it saves
        // those two (grad_input, D*T*e, and grad_weight, V*e in the weight's dtype, D here)
        // instead of the input and the logits. Workspace (estimate): one chunk's logits, about
        // T*e elements, and the matmul output it accumulates into grad_input, D*T*e.
        out.stored_bytes = projected_in + dt * tokens * e + keep_inputs * dt * v * e;
        out.checkpoint_bytes = out.stored_bytes;
        out.workspace_bytes = 2 * dt * tokens * e;
        return out;
      }
      // Gemma-2's final_logit_softcapping (Gemma2ForCausalLM.forward): logits / cap, torch.tanh,
      // * cap before the loss; tanh saves its D-byte output for backward (T*V more), the
      // divide's and multiply's inputs are freed as the forward rebinds `logits`. (Liger's fused
      // loss caps inside its chunks: nothing more stored, above.)
      const double softcap_out = m.final_logit_softcapping > 0 ? dt * tokens * v : 0;
      const double kept_inputs =
          keep_inputs * dt * tokens * (h + (e != h ? e : 0)) + softcap_out;
      if (!options.loss_upcast) {
        // The loss on the D-byte logits, as 2021 transformers' GPT2LMHeadModel.forward computed
        // it (before ForCausalLMLoss's upcast): `shift_logits = lm_logits[..., :-1,
        // :].contiguous()` then CrossEntropyLoss on them. Stored: log_softmax's D-byte output.
        // Workspace: forward, the logits and their shifted copy (2D); backward, log_softmax's
        // backward reads the log-probabilities' gradient and writes the shifted logits' (2D),
        // then the slice's backward writes the logits' (2D) beside the latter: 2D either way.
        out.stored_bytes = kept_inputs + dt * tokens * v + 8 * tokens;
        out.checkpoint_bytes = out.stored_bytes;
        out.workspace_bytes = 2 * dt * tokens * v;
        return out;
      }
      out.stored_bytes = kept_inputs + 4 * tokens * v + 8 * tokens;
      out.checkpoint_bytes = out.stored_bytes;
      out.workspace_bytes = tokens * v * std::max(dt + (dt < 4 ? 4 : 0), 8.0);
      return out;
    }

    case LayerKind::kBlock:
      break;
  }

  const double a = static_cast<double>(m.heads);
  const double f = static_cast<double>(m.ffn);
  // Attention: the q/k/v GEMM input, Q, K, V and the output projection's input, plus what the
  // variants add. MLA: Q and K of width a*(nope + rope), V and the output a*v_head_dim, and the
  // latents each keep for their norm and the next GEMM (kv: norm input and output, 2*kv_lora,
  // and the rotary key; q with q_lora_rank: 2*q_lora). q/k norms keep their inputs (A + G).
  double q_width = static_cast<double>(m.heads * m.head_dim);
  double k_width = static_cast<double>(m.kv_heads * m.head_dim);
  double v_width = k_width;
  double out_width = q_width;
  double attention_extra = 0;
  if (m.mla()) {
    q_width = a * static_cast<double>(m.qk_nope_head_dim + m.qk_rope_head_dim);
    k_width = q_width;
    v_width = a * static_cast<double>(m.v_head_dim);
    out_width = v_width;
    attention_extra = 2.0 * static_cast<double>(m.kv_lora_rank) +
                      static_cast<double>(m.qk_rope_head_dim) +
                      2.0 * static_cast<double>(m.q_lora_rank);
  } else if (m.qk_norm != QkNorm::kNone) {
    attention_extra = q_width + k_width;
  }
  double mlp_elements = 2 * f;
  double mlp_grad_elements = 2 * f;  // the gradients of the activation's output and input
  if (m.activation == Activation::kRelu) mlp_elements = f;
  if (m.activation == Activation::kGelu && m.gelu_formula) {
    // transformers' NewGELUActivation in eager PyTorch, 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x +
    // 0.044715 * x^3))) (activations.py; models/eager_ops.cc has its kernels): pow saves x (the
    // GeLU input, counted), tanh its output, and the last product both factors, 0.5 * x and
    // 1 + tanh (the scalar multiplies and the adds save nothing): 3f more than F.gelu's input.
    // (FastGELUActivation's chain saves 6f; it is counted as gelu_new.)
    mlp_elements += 3 * f;
  }
  if (m.activation == Activation::kSwiglu) {
    mlp_elements = 4 * f;
    mlp_grad_elements = 3 * f;  // the product's gradient, then the gate's and up's
    if (options.fused_swiglu) {
      // Liger's LigerSiLUMulFunction (liger_kernel/ops/swiglu.py) computes silu(gate) * up in
      // one kernel and saves only its inputs (ctx.save_for_backward(a, b)): gate, up and the
      // product (down_proj's input), 3f. Its backward (swiglu_backward) recomputes silu(gate)
      // and writes the gate's and up's gradients into the saved a and b in place, so the only
      // MLP gradient it allocates is the product's, f.
      mlp_elements = 3 * f;
      mlp_grad_elements = f;
    }
  }
  if (layer.moe_block) {
    // Estimate, per token: the router logits (E); for each of its k experts the dispatched copy
    // of its input (h), the expert's gate, up, silu(gate) and product (4*f_e) and its output
    // before the routing weight scales it (h); the shared expert's 4*f_s (its input is the norm
    // output, counted already) and, with a sigmoid gate, its output (h).
    // (Llama 4: every expert's copy of every token, routed_rows_per_token.)
    const double k = static_cast<double>(m.routed_rows_per_token());
    const double fe = static_cast<double>(m.expert_ffn);
    const double fs = static_cast<double>(m.shared_expert_ffn);
    mlp_elements = static_cast<double>(m.experts) + k * (2 * h + 4 * fe) + 4 * fs +
                   (m.shared_expert_gate ? h : 0);
    mlp_grad_elements = std::max(3 * k * fe, 3 * fs);
  }
  // Norms: the inputs they keep (the block input once when both parallel norms read it, the
  // two sublayer outputs for post-sublayer norms) and the GEMM inputs (one h when a single norm
  // feeds attention and MLP, else attention's and the MLP's: norm outputs, or the residual
  // stream without input norms).
  double norm_inputs = 0;
  if (m.pre_norm) {
    norm_inputs = m.parallel_residual ? h : 2 * h;
  } else if (!m.post_sublayer_norm) {
    norm_inputs = 2 * h;  // post-add norms
  }
  if (m.post_sublayer_norm) norm_inputs += 2 * h;
  const double gemm_inputs = m.parallel_residual && m.parallel_norms == 1 ? h : 2 * h;
  const bool hidden_dropout = m.dropout && m.family != Family::kLlama;
  const bool attention_dropout = m.attention_probs_dropout();

  // a*s*s*b elements; with Ulysses, (a/sp) heads over the full sp*s tokens; with AutoTP, the
  // rank's a/tp heads.
  const double t = tensor_parallel_;
  const double scores = a / t * s * tokens * static_cast<double>(options.sequence_parallel);
  double attention_bytes = 0;
  double attention_grad_bytes = 0;
  double qkv_elements = q_width + k_width + v_width;
  if (options.flash_attention) {
    attention_bytes = 4 * a / t * tokens;
    // Estimate: flash-attention 2's backward accumulates dQ in fp32 (4*T*A).
    attention_grad_bytes = 4 * tokens * q_width / t;
  } else if (m.eager_softmax_upcast()) {
    // Hugging Face eager attention of the Llama family (llama, mistral, qwen2:
    // eager_attention_forward in models/llama/modeling_llama.py) saves for backward:
    //   repeat_kv(key), repeat_kv(value): copies at the query width A (GQA expanded) -- the
    //     matmuls save these, not the g-head K and V;
    //   softmax(attn_weights, dim=-1, dtype=torch.float32): its fp32 output (4 bytes), which
    //     softmax's backward reads;
    //   .to(query.dtype): the D-byte probabilities the AV matmul saves (the same tensor in fp32);
    //   dropout(p=attention_dropout): with p > 0 a 1-byte mask and the D-byte dropped copy.
    //   Gemma-2 (eager_attention_forward in models/gemma2/modeling_gemma2.py): with
    //     attn_logit_softcapping the scores go through scores / cap, torch.tanh, * cap before
    //     the mask; tanh's backward reads its output, so the D-byte tanh output is saved too
    //     (the scalar divide and multiply save nothing).
    if (!m.mla()) qkv_elements = 3 * q_width;  // MLA has as many key/value heads as queries
    attention_bytes = (4 + (dt < 4 ? dt : 0)) * scores + (attention_dropout ? (1 + dt) * scores : 0);
    if (m.attn_logit_softcapping > 0) attention_bytes += dt * scores;
    // Estimate: the probabilities' gradient (D), its fp32 cast and softmax's fp32 input
    // gradient coexist.
    attention_grad_bytes = (dt < 4 ? dt + 8 : 2 * dt) * scores;
  } else {
    // GPT-2, OPT, GPT-NeoX eager attention: softmax in the compute dtype (their _attn).
    attention_bytes = dt * scores + (attention_dropout ? (1 + dt) * scores : 0);
    // Estimate: the gradients of the probabilities and of the scores coexist.
    attention_grad_bytes = 2 * dt * scores;
  }

  // Fine-tuning: inputs only a frozen weight's gradient read are not saved (Layer::unsaved;
  // PyTorch saves a matmul operand only for the other operand's gradient). The output
  // projection's input is also the attention output a fused kernel keeps (flash attention's O),
  // so only eager attention drops it. The down projection's input is the product of a gated MLP
  // (silu(gate) * up keeps its operands, not its output) or the GeLU output (GeLU keeps its
  // input); ReLU's backward reads the output it produced, so a ReLU MLP keeps it anyway. Each
  // LoRA adapter adds its lora_A output (rank r), which lora_B saves (Layer::adapter_elements).
  // (A mixture of experts' router and shared expert read the MLP input; the routed experts read
  // their dispatched copies, which the experts' estimate keeps.)
  // AutoTP (models/tensor_parallel.h; Korthikanti et al. 2022 §4.2.1, tensor parallelism
  // without sequence parallelism): the tensors between a column-split and a row-split linear --
  // Q, K, V, the attention output, q/k norm inputs, the MLP's inner tensors -- are 1/tp on each
  // rank; the norm inputs, the GEMM inputs (norm outputs), the dropout masks and the block's
  // input and output gradients are whole. Their s*b*h*(10 + 24/t + 5as/(ht)) for a GPT block.
  double unsaved = 0;        // of the whole tensors
  double unsaved_split = 0;  // of the split ones
  const bool two_inputs = gemm_inputs == 2 * h;  // separate attention and MLP inputs
  if (layer.unsaved.attention_in && (two_inputs || layer.unsaved.mlp_in)) unsaved += h;
  if (layer.unsaved.mlp_in && two_inputs) unsaved += h;
  if (layer.unsaved.out_in && !options.flash_attention) unsaved_split += out_width;
  if (layer.unsaved.down_in && !layer.moe_block && m.activation != Activation::kRelu) {
    unsaved_split += f;
  }
  const double split_elements =
      (qkv_elements + out_width + attention_extra + mlp_elements - unsaved_split) / t;
  const double elements = norm_inputs + gemm_inputs + split_elements - unsaved +
                          layer.adapter_elements;
  // The inputs of every norm: the block's, the q/k norms' (A + G, split under AutoTP) and
  // MLA's latent norms (kv_a_layernorm over kv_lora, q_a_layernorm over q_lora).
  double norm_elements = norm_inputs;
  if (m.mla()) {
    norm_elements += static_cast<double>(m.kv_lora_rank + m.q_lora_rank);
  } else if (m.qk_norm != QkNorm::kNone) {
    norm_elements += (q_width + k_width) / t;
  }
  out.stored_bytes = dt * tokens * elements +
                     rms_upcast_bytes(m, layer, options) * tokens * norm_elements +
                     (hidden_dropout ? 2 * tokens * h : 0) + attention_bytes +
                     tokens * layer.adapter_mask_bytes;
  // Full recompute keeps the block input only (reference §6).
  out.checkpoint_bytes = dt * tokens * h;
  // Estimate: the gradient entering and the one leaving the block, plus the largest set of
  // intermediate gradients alive at once (the MLP's or the attention's).
  out.workspace_bytes =
      2 * dt * tokens * h + std::max(dt * tokens * mlp_grad_elements / t, attention_grad_bytes);
  return out;
}

}  // namespace zplan::models
