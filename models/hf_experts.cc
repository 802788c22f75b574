// Mixture-of-experts and latent-attention keys of config.json (hf_config.cc reads the rest).
#include <set>
#include <string>

#include "base/input_error.h"
#include "base/json_reader.h"
#include "models/hf_reader.h"
#include "models/model_internal.h"

namespace zplan::models::internal {

namespace {

// The shared experts are one MLP of n_shared_experts * moe_intermediate_size.
void check_shared_width(const JsonReader& r, const ModelShape& s) {
  if (s.shared_expert_ffn > kMaxWidth) {
    r.fail("n_shared_experts",
           "must be at most " + std::to_string(kMaxWidth / s.expert_ffn) +
               " (the shared experts' width, n_shared_experts x moe_intermediate_size " +
               std::to_string(s.expert_ffn) + ", at most " + std::to_string(kMaxWidth) +
               "), got " + std::to_string(s.shared_expert_ffn / s.expert_ffn));
  }
}

}  // namespace

// Mixture of experts: MixtralConfig (num_local_experts 8, num_experts_per_tok 2, experts of
// width intermediate_size), Qwen2MoeConfig / Qwen3MoeConfig (num_experts 60 / 128,
// num_experts_per_tok 4 / 8, moe_intermediate_size 1408 / 768; Qwen2-MoE: a shared expert of
// shared_expert_intermediate_size 5632 with a sigmoid gate; decoder_sparse_step 1 and
// mlp_only_layers [] put experts in every block), DeepseekV2Config (n_routed_experts,
// num_experts_per_tok and n_shared_experts have no default; moe_intermediate_size 1407;
// first_k_dense_replace 0 dense blocks first; moe_layer_freq 1), DeepseekV3Config (256 routed
// experts, 8 a token, width 2048, 1 shared, 3 dense blocks first). `transformers_major` picks
// the experts' layout (ModelShape::fused_experts).
void read_experts(const JsonReader& r, const std::string& type, int transformers_major,
                  ModelShape& s) {
  // The block's class (in each model type's modeling file) and its decoder-layer attribute.
  const char* block_class = type == "mixtral"       ? "MixtralSparseMoeBlock"
                            : type == "qwen2_moe"   ? "Qwen2MoeSparseMoeBlock"
                            : type == "qwen3_moe"   ? "Qwen3MoeSparseMoeBlock"
                            : type == "deepseek_v3" ? "DeepseekV3MoE"
                            : type == "gpt_oss"     ? "GptOssMLP"
                            : type == "glm4_moe"    ? "Glm4MoeMoE"
                            : type == "olmoe"       ? "OlmoeSparseMoeBlock"
                            : type == "llama4_text" ? "Llama4TextMoe"
                                                    : "DeepseekV2Moe";
  const std::string module = type == "llama4_text" ? "llama4" : type;
  s.moe_block_class = "transformers.models." + module + ".modeling_" + module + "." + block_class;
  // transformers 5 moved Mixtral's block to `mlp` with the experts' 3D layout
  // (MixtralDecoderLayer.mlp = MixtralSparseMoeBlock); 4.x named it block_sparse_moe.
  // GptOssExperts keeps the experts as 3D tensors with biases in every transformers release
  // that has the model (4.55 on): transformers 5 runs them with grouped_mm, 4.x in a loop over
  // the experts reached (expert_loop).
  const bool gpt_oss = type == "gpt_oss";
  const bool llama4 = type == "llama4_text";
  // Llama4TextExperts is 3D (gate_up_proj [E, h, 2f], down_proj [E, f, h]) in every release.
  s.fused_experts = gpt_oss || llama4 || transformers_major >= 5;
  s.dense_experts = llama4;
  s.expert_loop = gpt_oss && transformers_major < 5;
  s.gpt_oss_experts = gpt_oss;
  s.moe_block_name = type == "mixtral" && !s.fused_experts ? "block_sparse_moe"
                     : llama4                               ? "feed_forward"
                                                            : "mlp";
  // transformers 5's routers are TopKRouter modules of their own (MixtralTopKRouter,
  // Qwen2MoeTopKRouter, ...), not nn.Linear; DeepseekV2Moe keeps gate = nn.Linear(h, E), and
  // DeepSeek-V3's and GPT-OSS's gate are TopkRouter modules in both layouts.
  s.router_linear = type == "deepseek_v2" || llama4 ||
                    (!s.fused_experts && type != "deepseek_v3" && type != "glm4_moe" && !gpt_oss);
  if (type == "mixtral" || gpt_oss) {
    // MixtralConfig: 8 experts, 2 a token; GptOssConfig: 128, 4; both of width
    // intermediate_size.
    s.experts = sized_dim(r, "num_local_experts", gpt_oss ? 128 : 8, kMaxWidth);
    s.experts_per_token = sized_dim(r, "num_experts_per_tok", gpt_oss ? 4 : 2, kMaxWidth);
    s.expert_ffn = s.ffn;
  } else if (llama4) {
    // Llama4TextConfig: 16 experts, 1 a token, each and the shared expert of width
    // intermediate_size; the dense blocks' MLP of intermediate_size_mlp (16384). A block is MoE
    // when its index is in moe_layers (Llama4TextDecoderLayer.is_moe_layer), which the config
    // keeps when given and otherwise builds from interleave_moe_layer_step: blocks step - 1,
    // 2 * step - 1, ... Order and repeats in the list do not matter; zplan builds every n-th
    // block, so a list of any other pattern is not modelled, and an empty one is a dense model.
    s.experts = sized_dim(r, "num_local_experts", 16, kMaxWidth);
    s.experts_per_token = sized_dim(r, "num_experts_per_tok", 1, kMaxWidth);
    s.expert_ffn = s.ffn;
    s.shared_expert_ffn = s.ffn;
    s.ffn = sized_dim(r, "intermediate_size_mlp", 16384, kMaxWidth);
    if (r.has("moe_layers")) {
      const nlohmann::json& list = r.json().at("moe_layers");
      if (!list.is_array()) {
        r.fail("moe_layers", "must be a list of block indices, got " + describe_json_value(list));
      }
      std::set<int64_t> blocks;
      for (size_t i = 0; i < list.size(); ++i) {
        const nlohmann::json& v = list[i];
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= s.layers) {
          r.fail("moe_layers", "entry " + std::to_string(i) + " must be a block index (0 to " +
                                   std::to_string(s.layers - 1) + "), got " +
                                   describe_json_value(v));
        }
        blocks.insert(v.get<int64_t>());
      }
      if (blocks.empty()) {
        s.dense_layers = s.layers;  // no MoE block: planned dense (below)
      } else {
        s.moe_layer_step = *blocks.begin() + 1;
        for (int64_t i = 0; i < s.layers; ++i) {
          const bool every_nth = i % s.moe_layer_step == s.moe_layer_step - 1;
          if (every_nth != (blocks.count(i) > 0)) {
            r.fail("moe_layers",
                   "not modelled: experts in blocks other than every n-th (the list starts at "
                   "block " + std::to_string(s.moe_layer_step - 1) + ", so n = " +
                       std::to_string(s.moe_layer_step) + ", but block " + std::to_string(i) +
                       (every_nth ? " is missing" : " is in it") + ")");
          }
        }
      }
    } else {
      s.moe_layer_step = sized_dim(r, "interleave_moe_layer_step", 1, kMaxLayers);
      if (s.moe_layer_step > s.layers) {
        r.fail("interleave_moe_layer_step", "must be at most num_hidden_layers (" +
                                                std::to_string(s.layers) + "), got " +
                                                std::to_string(s.moe_layer_step));
      }
    }
  } else if (type == "olmoe") {
    // OlmoeConfig: 64 experts, 8 a token, each of width intermediate_size; no shared expert.
    s.experts = sized_dim(r, "num_experts", 64, kMaxWidth);
    s.experts_per_token = sized_dim(r, "num_experts_per_tok", 8, kMaxWidth);
    s.expert_ffn = s.ffn;
  } else if (type == "glm4_moe") {
    // Glm4MoeConfig: 128 routed experts of width moe_intermediate_size 1408, 8 a token, one
    // shared expert (Glm4MoeMoE.shared_experts, of width moe_intermediate_size *
    // n_shared_experts), and first_k_dense_replace 1 dense block (width intermediate_size)
    // first. Glm4MoeTopkRouter is a module of its own in both layouts, and its
    // e_score_correction_bias a buffer, not a parameter.
    s.experts = sized_dim(r, "n_routed_experts", 128, kMaxWidth);
    s.experts_per_token = sized_dim(r, "num_experts_per_tok", 8, kMaxWidth);
    s.expert_ffn = sized_dim(r, "moe_intermediate_size", 1408, kMaxWidth);
    s.shared_expert_ffn =
        sized_count(r, "n_shared_experts", 1) *
        s.expert_ffn;
    check_shared_width(r, s);
    s.dense_layers = sized_count(r, "first_k_dense_replace", 1);
    if (s.dense_layers > s.layers) {
      r.fail("first_k_dense_replace", "must be at most num_hidden_layers (" +
                                          std::to_string(s.layers) + "), got " +
                                          std::to_string(s.dense_layers));
    }
  } else if (type == "qwen2_moe" || type == "qwen3_moe") {
    const bool q2 = type == "qwen2_moe";
    s.experts = sized_dim(r, "num_experts", q2 ? 60 : 128, kMaxWidth);
    s.experts_per_token = sized_dim(r, "num_experts_per_tok", q2 ? 4 : 8, kMaxWidth);
    s.expert_ffn = sized_dim(r, "moe_intermediate_size", q2 ? 1408 : 768, kMaxWidth);
    if (q2) {
      s.shared_expert_ffn = sized_dim(r, "shared_expert_intermediate_size", 5632, kMaxWidth);
      s.shared_expert_gate = true;
    }
    refuse_null(r, "decoder_sparse_step", 1);
    refuse_if(r, "decoder_sparse_step", r.has("decoder_sparse_step") &&
                                            r.positive_integer("decoder_sparse_step") != 1,
              "not modelled: experts in every decoder_sparse_step-th block only (zplan builds "
              "them in every block: must be 1)");
    require_empty_list(r, "mlp_only_layers",
                       "not modelled: dense MLPs in chosen blocks (zplan builds experts in "
                       "every block: must be empty)");
  } else if (type == "deepseek_v2" || type == "deepseek_v3") {
    // DeepseekV3Config gives every key a default (DeepSeek-V3's: 256 routed experts, 8 a
    // token, width 2048, one shared expert, three dense blocks first); DeepseekV2Config none
    // for the first three.
    const bool v3 = type == "deepseek_v3";
    s.experts = v3 ? sized_dim(r, "n_routed_experts", 256, kMaxWidth)
                   : dim(r, "n_routed_experts", kMaxWidth);
    s.experts_per_token = v3 ? sized_dim(r, "num_experts_per_tok", 8, kMaxWidth)
                             : dim(r, "num_experts_per_tok", kMaxWidth);
    s.expert_ffn = sized_dim(r, "moe_intermediate_size", v3 ? 2048 : 1407, kMaxWidth);
    // null: DeepseekV2Moe builds no shared experts (`is not None`); DeepseekV3MoE multiplies
    // moe_intermediate_size by it unconditionally, so the model does not build.
    if (v3 && r.is_null("n_shared_experts")) {
      r.fail("n_shared_experts",
             "null: DeepseekV3MoE sizes its shared experts as moe_intermediate_size * "
             "n_shared_experts, which transformers cannot build; give 0 or more");
    }
    int64_t shared = r.has("n_shared_experts") ? r.non_negative_integer("n_shared_experts")
                                               : (v3 ? 1 : 0);
    s.shared_expert_ffn = shared * s.expert_ffn;
    check_shared_width(r, s);
    s.dense_layers = sized_count(r, "first_k_dense_replace", v3 ? 3 : 0);
    if (s.dense_layers > s.layers) {
      r.fail("first_k_dense_replace", "must be at most num_hidden_layers (" +
                                          std::to_string(s.layers) + "), got " +
                                          std::to_string(s.dense_layers));
    }
    refuse_null(r, "moe_layer_freq", 1);
    refuse_if(r, "moe_layer_freq",
              r.has("moe_layer_freq") && r.positive_integer("moe_layer_freq") != 1,
              "not modelled: experts in every moe_layer_freq-th block only (must be 1)");
    // DeepSeek-V3 always routes noaux_tc: DeepseekV3TopkRouter's e_score_correction_bias is a
    // buffer, not a parameter, so it adds nothing ZeRO holds.
    refuse_if(r, "topk_method",
              !v3 && r.has("topk_method") && r.string("topk_method") == "noaux_tc",
              "not modelled for deepseek_v2: noaux_tc routing (its e_score_correction_bias)");
  }
  if (s.experts_per_token > s.experts) {
    r.fail("num_experts_per_tok", "must be at most the number of experts (" +
                                      std::to_string(s.experts) + "), got " +
                                      std::to_string(s.experts_per_token));
  }
  // first_k_dense_replace = num_hidden_layers: every block keeps its dense MLP and transformers
  // builds no MoE module, so the model is planned as the dense one it is.
  if (s.dense_layers >= s.layers) {
    const ModelShape dense;
    s.experts = dense.experts;
    s.experts_per_token = dense.experts_per_token;
    s.expert_ffn = dense.expert_ffn;
    s.shared_expert_ffn = dense.shared_expert_ffn;
    s.shared_expert_gate = dense.shared_expert_gate;
    s.dense_layers = dense.dense_layers;
    s.fused_experts = dense.fused_experts;
    s.router_linear = dense.router_linear;
    s.expert_loop = dense.expert_loop;
    s.dense_experts = dense.dense_experts;
    s.moe_layer_step = dense.moe_layer_step;
  }
}

// DeepseekV2Config's multi-head latent attention: q_lora_rank (default 1536; null = a plain
// q_proj), kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128.
void read_latent_attention(const JsonReader& r, ModelShape& s) {
  if (r.json().contains("q_lora_rank")) {
    s.q_lora_rank = r.has("q_lora_rank") ? dim(r, "q_lora_rank", kMaxWidth) : 0;
  } else {
    s.q_lora_rank = 1536;
  }
  s.kv_lora_rank = sized_dim(r, "kv_lora_rank", 512, kMaxWidth);
  s.qk_rope_head_dim = sized_dim(r, "qk_rope_head_dim", 64, kMaxWidth);
  s.qk_nope_head_dim = sized_dim(r, "qk_nope_head_dim", 128, kMaxWidth);
  s.v_head_dim = sized_dim(r, "v_head_dim", 128, kMaxWidth);
  s.head_dim = s.qk_nope_head_dim + s.qk_rope_head_dim;
}

}  // namespace zplan::models::internal
