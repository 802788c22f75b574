// module_names: the Hugging Face module names of each family (module_names.h).
#include "models/module_names.h"

#include <string>

namespace zplan::models::internal {

ModuleNames module_names(const ModelShape& s) {
  ModuleNames n;
  switch (s.family) {
    case Family::kGpt:
      n.block = "h";
      n.norm1 = "ln_1";
      n.norm2 = "ln_2";
      n.qkv = "attn.c_attn";
      n.out = "attn.c_proj";
      n.fc1 = "mlp.c_fc";
      n.fc2 = "mlp.c_proj";
      n.tokens = "wte";
      n.positions = "wpe";
      n.final_norm = "ln_f";
      n.head = "lm_head";
      break;
    case Family::kOpt:
      n.block = "layers";
      n.norm1 = "self_attn_layer_norm";
      n.norm2 = "final_layer_norm";
      n.q = "self_attn.q_proj";
      n.k = "self_attn.k_proj";
      n.v = "self_attn.v_proj";
      n.out = "self_attn.out_proj";
      n.fc1 = "fc1";
      n.fc2 = "fc2";
      n.tokens = "embed_tokens";
      n.positions = "embed_positions";
      n.final_norm = "final_layer_norm";
      n.head = "lm_head";
      break;
    case Family::kNeox:
      n.block = "layers";
      n.norm1 = "input_layernorm";
      n.norm2 = "post_attention_layernorm";
      n.qkv = "attention.query_key_value";
      n.out = "attention.dense";
      n.fc1 = "mlp.dense_h_to_4h";
      n.fc2 = "mlp.dense_4h_to_h";
      n.tokens = "embed_in";
      n.positions = "embed_positions";
      n.final_norm = "final_layer_norm";
      n.head = "embed_out";
      break;
    case Family::kGptj:
      // GPTJBlock: ln_1 feeds attn and mlp (parallel), attn.{q,k,v,out}_proj, mlp.fc_in/fc_out.
      n.block = "h";
      n.norm1 = "ln_1";
      n.q = "attn.q_proj";
      n.k = "attn.k_proj";
      n.v = "attn.v_proj";
      n.out = "attn.out_proj";
      n.fc1 = "mlp.fc_in";
      n.fc2 = "mlp.fc_out";
      n.tokens = "wte";
      n.final_norm = "ln_f";
      n.head = "lm_head";
      break;
    case Family::kFalcon:
      // FalconDecoderLayer: input_layernorm (one norm), or ln_attn and ln_mlp (two, the new
      // decoder architecture), or input_layernorm + post_attention_layernorm (sequential).
      n.block = "h";
      n.norm1 = s.parallel_residual && s.parallel_norms == 2 ? "ln_attn" : "input_layernorm";
      n.norm2 = s.parallel_residual ? "ln_mlp" : "post_attention_layernorm";
      n.qkv = "self_attention.query_key_value";
      n.out = "self_attention.dense";
      n.fc1 = "mlp.dense_h_to_4h";
      n.fc2 = "mlp.dense_4h_to_h";
      n.tokens = "word_embeddings";
      n.final_norm = "ln_f";
      n.head = "lm_head";
      break;
    case Family::kLlama:
    case Family::kMlp:
      if (s.qwen_names) {
        // Qwen (v1, remote code modeling_qwen.py): QWenBlock ln_1, attn.c_attn (q, k, v in one
        // Linear), attn.c_proj, ln_2, mlp.w1 and mlp.w2 (QWenMLP: c_proj(w1(x) * silu(w2(x))),
        // so w2 is the gate), mlp.c_proj; QWenModel wte, h, ln_f.
        n.block = "h";
        n.norm1 = "ln_1";
        n.norm2 = "ln_2";
        n.qkv = "attn.c_attn";
        n.out = "attn.c_proj";
        n.gate = "mlp.w2";
        n.up = "mlp.w1";
        n.down = "mlp.c_proj";
        n.tokens = "wte";
        n.final_norm = "ln_f";
        n.head = "lm_head";
        break;
      }
      n.block = "layers";
      n.norm1 = "input_layernorm";
      n.norm2 = "post_attention_layernorm";
      n.q = "self_attn.q_proj";
      n.k = "self_attn.k_proj";
      n.v = "self_attn.v_proj";
      n.out = "self_attn.o_proj";
      {
        // Llama 4's decoder layer names its MLP, dense or sparse, feed_forward.
        const std::string mlp = s.moe_block_name == "feed_forward" ? "feed_forward." : "mlp.";
        n.gate = mlp + "gate_proj";
        n.up = mlp + "up_proj";
        n.down = mlp + "down_proj";
        if (s.fused_gate_up) n.gate_up = mlp + "gate_up_proj";
      }
      if (s.fused_qkv) n.qkv = "self_attn.qkv_proj";
      n.tokens = "embed_tokens";
      n.positions = "embed_positions";
      n.final_norm = "norm";
      n.head = "lm_head";
      break;
  }
  return n;
}

}  // namespace zplan::models::internal
