#include "models/eager_ops.h"

namespace zplan::models::internal {

namespace {

// Hugging Face's RMSNorm as eager PyTorch runs it (LlamaRMSNorm.forward, and the families'
// copies of it in transformers 4.x-5.x; Qwen v1's RMSNorm without flash-attn's optional
// layer_norm extension is the same chain), per element of a 16-bit input:
//   forward, 8 kernels, 36 bytes: to(float32) reads 2 and writes 4; pow(2) 4 + 4; mean 4;
//     + eps and rsqrt (per row); hidden * rsqrt 4 + 4; to(input_dtype) 4 + 2; weight * x 2 + 2.
//   backward, 14 kernels, 84 bytes (autograd through the same graph): the weight's multiply,
//     grad * weight 2 + 2, the weight's gradient grad * x 4 + 2 and its sum over tokens 2; the
//     cast's 2 + 4; hidden * rsqrt's, grad * rsqrt 4 + 4, the per-row sum of grad * hidden
//     8 + 4 and 4; rsqrt's and the add's (per row); mean's expand 4; pow's, 2 * x 4 + 4 and
//     its product with the gradient 8 + 4; the fp32 input's two gradients added 8 + 4; the
//     first cast's 4 + 2. (The weight's gradient is counted when it is frozen too, 8 of 84.)
// Liger-Kernel's LigerRMSNorm is one kernel each way: x in, y out (4) and x, dy in, dx out (6).
constexpr double kRmsForward = 36, kRmsBackward = 84;
constexpr int kRmsKernels = 8, kRmsBackwardKernels = 14;

// Gemma's RMSNorm (GemmaRMSNorm.forward, also Gemma-2's and Gemma-3's): self._norm(x.float()),
// then output * (1.0 + self.weight.float()) and output.type_as(x): the weight is applied in fp32
// before the cast back. Per element of a 16-bit input:
//   forward, 10 kernels, 40 bytes: float 2 + 4; pow 4 + 4; mean 4; + eps and rsqrt (per row);
//     x * rsqrt 4 + 4; weight.float() and 1 + weight (per weight element); output * (1 + w)
//     4 + 4; type_as 4 + 2.
//   backward, 16 kernels, 96 bytes: type_as's 2 + 4; the weight's multiply, grad * (1 + w) 4 + 4,
//     the weight's gradient grad * output 4 + 4 + 4 and its sum over tokens 4, then the two
//     per-weight kernels of the float and the add; x * rsqrt's as Llama's, 8, 12 and 4; rsqrt's
//     and the add's (per row); mean's expand 4; pow's 8 and 12; the fp32 input's two gradients
//     added 12; the first cast's 4 + 2.
// OLMo-2's (Olmo2RMSNorm.forward, OLMo-3's): (self.weight * hidden_states).to(input_dtype) on the
// fp32 normalized tensor, the same bytes without Gemma's two per-weight kernels each way.
constexpr double kRmsFp32WeightForward = 40, kRmsFp32WeightBackward = 96;
constexpr int kGemmaRmsKernels = 10, kGemmaRmsBackwardKernels = 16;
constexpr int kOlmo2RmsKernels = 8, kOlmo2RmsBackwardKernels = 14;

// Hugging Face's rotary, apply_rotary_pos_emb with rotate_half (Llama's, copied by the rotary
// families), per element of Q and of K, 16-bit:
//   forward, 5 kernels, 20 bytes: q * cos 2 + 2; rotate_half's -x2 1 + 1 and its cat 2 + 2;
//     rotate_half(q) * sin 2 + 2; the sum 4 + 2 (cos and sin, [b, s, d] broadcast over the heads,
//     not counted).
//   backward, 9 kernels, 30 bytes: the sum passes its gradient through; grad * sin 2 + 2; cat's
//     gradient is two views; the neg's 1 + 1; each slice's gradient is a zero tensor of the
//     whole width and a copy of its half, twice (2 + 1 + 1); grad * cos 2 + 2; q's three
//     gradients added, twice 4 + 2.
// Liger's rotary is one kernel for Q and K each way, reading and writing them (4).
constexpr double kRotaryForward = 20, kRotaryBackward = 30;
constexpr int kRotaryKernels = 5, kRotaryBackwardKernels = 9;

// Qwen v1's apply_rotary_pos_emb (modeling_qwen.py), per element of Q and of K (called on each):
// with flash-attn installed (_import_flash_attn, with use_flash_attn) t.float() 2 + 4,
// flash_attn.layers.rotary.apply_rotary_emb_func on the fp32 copy 4 + 4 and type_as(t) 4 + 2:
// 3 kernels and 20 bytes, and the same back. Without it, the fp32 fallback: t.float() 6,
// t_rot * cos 8, _rotate_half's neg 4 and cat 8, * sin 8, the sum 12, the cat with the (empty)
// pass-through part 8 and type_as 6: 8 kernels, 60 bytes; backward 10 kernels, 64 bytes
// (type_as's 6, * sin's 8, neg's 4, unbind's stack 8, * cos's 8, t_rot's two gradients added 12,
// the slice's zeros and copy 12, float's 6).
constexpr double kQwenRotaryForward = 60, kQwenRotaryBackward = 64, kQwenFlashRotary = 20;
constexpr int kQwenRotaryKernels = 8, kQwenRotaryBackwardKernels = 10, kQwenFlashRotaryKernels = 3;

// transformers' NewGELUActivation (gelu_new), 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 *
// x^3))) in eager PyTorch, per element (16-bit):
//   forward, 8 kernels, 36 bytes: pow 2 + 2; * 0.044715 2 + 2; x + 4 + 2; * sqrt(2 / pi) 2 + 2;
//     tanh 2 + 2; 1 + 2 + 2; 0.5 * x 2 + 2; the product 4 + 2.
//   backward, 11 kernels, 56 bytes: the product's two gradients 4 + 2 each; tanh's 4 + 2; the
//     two scalings' 2 + 2 each; pow's, 3 * x^2 (pow 2 + 2, * 3 2 + 2) and * grad 4 + 2;
//     0.5 * x's 2 + 2; x's three gradients added, twice 4 + 2.
// For backward it saves x, tanh's output and both factors of the last product, 3f more than
// F.gelu's input (models/activations.cc).
constexpr double kGeluFormulaForward = 36, kGeluFormulaBackward = 56;
constexpr int kGeluFormulaKernels = 8, kGeluFormulaBackwardKernels = 11;

}  // namespace

void set_rms_norm(ComputeOp& op, int64_t row, RmsNormCode code) {
  const double w = static_cast<double>(row);
  switch (code) {
    case RmsNormCode::kLlama:
      op.bytes_per_token = kRmsForward * w;
      op.backward_bytes_per_token = kRmsBackward * w;
      op.kernels = kRmsKernels;
      op.backward_kernels = kRmsBackwardKernels;
      break;
    case RmsNormCode::kGemma:
    case RmsNormCode::kOlmo2: {
      const bool gemma = code == RmsNormCode::kGemma;
      op.bytes_per_token = kRmsFp32WeightForward * w;
      op.backward_bytes_per_token = kRmsFp32WeightBackward * w;
      op.kernels = gemma ? kGemmaRmsKernels : kOlmo2RmsKernels;
      op.backward_kernels = gemma ? kGemmaRmsBackwardKernels : kOlmo2RmsBackwardKernels;
      break;
    }
  }
  op.fused = {FusedBy::kLiger, 4.0 * w, 6.0 * w, 1};
}

ComputeOp rotary_op(int64_t width, bool qwen_v1) {
  const double w = static_cast<double>(width);
  ComputeOp op;
  op.name = "rotary";
  op.kind = OpKind::kMemoryBound;
  op.tp = TpSplit::kSplit;
  if (qwen_v1) {
    op.bytes_per_token = kQwenRotaryForward * w;
    op.backward_bytes_per_token = kQwenRotaryBackward * w;
    op.kernels = 2 * kQwenRotaryKernels;
    op.backward_kernels = 2 * kQwenRotaryBackwardKernels;
    op.fused = {FusedBy::kFlashAttn, kQwenFlashRotary * w, kQwenFlashRotary * w,
                2 * kQwenFlashRotaryKernels};
  } else {
    op.bytes_per_token = kRotaryForward * w;
    op.backward_bytes_per_token = kRotaryBackward * w;
    op.kernels = 2 * kRotaryKernels;
    op.backward_kernels = 2 * kRotaryBackwardKernels;
    op.fused = {FusedBy::kLiger, 4.0 * w, 4.0 * w, 1};
  }
  return op;
}

void set_gelu_formula(ComputeOp& op, int64_t ffn) {
  const double f = static_cast<double>(ffn);
  op.bytes_per_token = kGeluFormulaForward * f;
  op.backward_bytes_per_token = kGeluFormulaBackward * f;
  op.kernels = kGeluFormulaKernels;
  op.backward_kernels = kGeluFormulaBackwardKernels;
}

void set_liger_swiglu(ComputeOp& silu, ComputeOp& product, int64_t ffn) {
  // LigerSiLUMulFunction: gate and up in, the product out (6f); backward reads the gradient, gate
  // and up and writes both gradients (10f). The SiLU's own kernel is gone (0 kernels).
  const double f = static_cast<double>(ffn);
  silu.fused = {FusedBy::kLiger, 0, 0, 0};
  product.fused = {FusedBy::kLiger, 6.0 * f, 10.0 * f, 1};
}

}  // namespace zplan::models::internal
