// The elementwise ops that a model's code runs as chains of eager PyTorch kernels (Hugging Face's
// RMSNorm, rotary, gelu_new formula), counted kernel by kernel from that code, with the one fused
// kernel that replaces each where the step has it (ComputeOp::fused: Liger-Kernel's, flash-attn's).
// Used by models/model_builder.cc; not for use outside models/.
#ifndef ZPLAN_MODELS_EAGER_OPS_H_
#define ZPLAN_MODELS_EAGER_OPS_H_

#include <cstdint>

#include "models/model.h"

namespace zplan::models::internal {

// Makes `op` (a memory-bound op) Hugging Face's RMSNorm over `row` elements per token, the chain
// of the family's `code` (LlamaRMSNorm's, GemmaRMSNorm's or Olmo2RMSNorm's), with Liger's
// LigerRMSNorm as its fused kernel.
void set_rms_norm(ComputeOp& op, int64_t row, RmsNormCode code);

// The rotary embedding on `width` elements of the queries and keys per token (the op named
// "rotary", split under AutoTP): Hugging Face's apply_rotary_pos_emb with Liger's kernel as its
// fused form, or, with qwen_v1, Qwen v1's fp32 fallback with flash-attn's kernel as its fused
// form (run with FlashAttention-2).
ComputeOp rotary_op(int64_t width, bool qwen_v1);

// Makes `op` (the "gelu" op over `ffn` elements per token) transformers' tanh formula
// (NewGELUActivation), eight eager kernels.
void set_gelu_formula(ComputeOp& op, int64_t ffn);

// Gives SwiGLU's `silu` and `product` ops (over `ffn` elements per token) Liger's
// LigerSiLUMulFunction as their fused kernel: one for both.
void set_liger_swiglu(ComputeOp& silu, ComputeOp& product, int64_t ffn);

}  // namespace zplan::models::internal

#endif  // ZPLAN_MODELS_EAGER_OPS_H_
