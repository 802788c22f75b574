// The general decoder's families (issue 16 item 4): each checkpoint's parameter count exactly as
// published, the shapes each family's modules take, MoE active parameters and FLOPs, MLA, and
// the configs zplan refuses. Sources of every count and config: tests/models/data/SOURCES.md.
#include <string>

#include <catch2/catch.hpp>

#include "base/json_reader.h"
#include "models/catalog.h"
#include "models/model.h"
#include "tests/models/test_util.h"

namespace zplan::models {
namespace {

using testing::data_path;
using testing::example_path;
using testing::input_error_of;

std::string error_of(const std::string& text) {
  return input_error_of(
      [&] { model_from_hf_config(parse_json_text(text, "config.json"), "config.json"); });
}

const Module* find_module(const Model& m, const std::string& name) {
  for (const Layer& l : m.layers()) {
    for (const Module& mod : l.modules) {
      if (mod.name == name) return &mod;
    }
  }
  return nullptr;
}

int64_t numel_of(const Model& m, const std::string& module) {
  const Module* mod = find_module(m, module);
  REQUIRE(mod != nullptr);
  return mod->numel();
}

// Parameters of the modules named `prefix` or under it (an MoE block's router, experts and
// shared expert are modules of their own, as in transformers 4.x).
int64_t numel_under(const Model& m, const std::string& prefix) {
  int64_t n = 0;
  for (const Layer& l : m.layers()) {
    for (const Module& mod : l.modules) {
      if (mod.name == prefix || mod.name.rfind(prefix + ".", 0) == 0) n += mod.numel();
    }
  }
  return n;
}

TEST_CASE("new families: parameter counts exactly as published", "[models]") {
  // Each: zplan's count == the published total, and == the closed form from the shapes.
  SECTION("Mixtral-8x7B: 8 experts, top 2, untied") {
    Model m = load_model(example_path("Mixtral-8x7B-v0.1.json"));
    CHECK(m.num_params() == 46'702'792'704);
    const int64_t h = 4096, f = 14336;
    const int64_t attn = 2 * h * h + 2 * h * 1024;
    CHECK(m.num_params() == 32 * (attn + 2 * h + 8 * h + 8 * 3 * h * f) + 2 * 32000 * h + h);
    // Active: the 6 experts a token skips in each of the 32 blocks are not counted.
    CHECK(m.active_params() == m.num_params() - 32 * 6 * 3 * h * f);
    CHECK(m.active_params() == 12'879'925'248);
    CHECK(m.shape().experts == 8);
    CHECK(m.shape().experts_per_token == 2);
  }
  SECTION("Qwen1.5-MoE-A2.7B: 60 experts, top 4, gated shared expert, q/k/v biases") {
    Model m = load_model(data_path("Qwen1.5-MoE-A2.7B.json"), 4);
    CHECK(m.num_params() == 14'315'784'192);
    const int64_t h = 2048;
    CHECK(numel_under(m, "layers.0.mlp") ==
          60 * h + 60 * 3 * h * 1408 + 3 * h * 5632 + h);  // router, experts, shared, its gate
    CHECK(numel_of(m, "layers.0.mlp.experts.59.down_proj") == 1408 * h);
    CHECK(numel_of(m, "layers.0.self_attn.q_proj") == h * h + h);
    CHECK(m.active_params() == 2'689'173'504);  // less 24 * 56 unvisited experts
    // transformers 5: the same tensors' elements, the experts as one module of two 3D tensors.
    Model v5 = load_model(data_path("Qwen1.5-MoE-A2.7B.json"));
    CHECK(v5.num_params() == m.num_params());
    CHECK(v5.active_params() == m.active_params());
    CHECK(numel_of(v5, "layers.0.mlp.experts") == 60 * 3 * h * 1408);
    CHECK(numel_under(v5, "layers.0.mlp") == numel_under(m, "layers.0.mlp"));
    CHECK(find_module(v5, "layers.0.mlp.experts.59.down_proj") == nullptr);
  }
  SECTION("Qwen3-30B-A3B: 128 experts, top 8, per-head q/k norms") {
    Model m = load_model(data_path("Qwen3-30B-A3B.json"));
    CHECK(m.num_params() == 30'532'122'624);
    CHECK(numel_of(m, "layers.0.self_attn.q_norm") == 128);
    CHECK(numel_of(m, "layers.0.self_attn.k_norm") == 128);
    CHECK(m.active_params() == m.num_params() - 48LL * 120 * 3 * 2048 * 768);
    CHECK(m.active_params() == 3'353'032'704);
  }
  SECTION("DeepSeek-V2-Lite: MLA without q_lora, 64 experts top 6, 2 shared, 1 dense block") {
    Model m = load_model(data_path("DeepSeek-V2-Lite.json"));
    CHECK(m.num_params() == 15'706'484'224);
    const int64_t h = 2048;
    CHECK(numel_of(m, "layers.0.self_attn.q_proj") == h * 16 * 192);
    CHECK(numel_of(m, "layers.0.self_attn.kv_a_proj_with_mqa") == h * (512 + 64));
    CHECK(numel_of(m, "layers.0.self_attn.kv_a_layernorm") == 512);
    CHECK(numel_of(m, "layers.0.self_attn.kv_b_proj") == 512 * 16 * (128 + 128));
    CHECK(numel_of(m, "layers.0.self_attn.o_proj") == 16 * 128 * h);
    CHECK(numel_of(m, "layers.0.mlp.down_proj") == 10944 * h);  // first_k_dense_replace: dense
    CHECK(find_module(m, "layers.0.mlp.gate") == nullptr);
    CHECK(numel_under(m, "layers.1.mlp") == 64 * h + 64 * 3 * h * 1408 + 3 * h * 2 * 1408);
    CHECK_FALSE(m.layers()[1].moe_block);  // layers()[0] is the embedding
    CHECK(m.layers()[2].moe_block);
    // 26 MoE blocks, 58 of 64 experts unvisited by each token.
    CHECK(m.active_params() == m.num_params() - 26LL * 58 * 3 * h * 1408);
    // DeepseekV2Moe's shared experts, fused into one MLP of n * width: shared_experts.
    CHECK(numel_of(m, "layers.1.mlp.shared_experts.down_proj") == 2 * 1408 * h);
  }
  SECTION("DeepSeek-R1 (DeepSeek-V3's shapes): MLA with q_lora, 256 experts top 8, 3 dense") {
    // The V3 technical report's 671B total and 37B activated, without the multi-token-
    // prediction module (num_nextn_predict_layers 1: transformers does not build it).
    Model m = load_model(data_path("DeepSeek-R1.json"));
    const int64_t h = 7168, f = 2048, layers = 61, moe_layers = 58;
    const int64_t attn = h * 1536 + 1536 + 1536 * 128 * 192 + h * (512 + 64) + 512 +
                         512 * 128 * (128 + 128) + 128 * 128 * h + 2 * h;
    CHECK(m.num_params() == layers * attn + 3 * 3 * h * 18432 +
                                moe_layers * (256 * 3 * h * f + 3 * h * f + 256 * h) +
                                2 * 129280LL * h + h);
    CHECK(m.num_params() == 671'026'404'352);
    CHECK(m.active_params() == m.num_params() - moe_layers * 248 * 3 * h * f);
    CHECK(m.active_params() == 37'552'282'624);
    CHECK_FALSE(m.layers()[3].moe_block);  // layers()[0] is the embedding: blocks 0-2 dense
    CHECK(m.layers()[4].moe_block);
    CHECK(m.shape().moe_block_class_name() == "DeepseekV3MoE");
    CHECK(numel_of(m, "layers.3.mlp.experts") == 256 * 3 * h * f);
    CHECK(numel_of(m, "layers.3.mlp.shared_experts.gate_proj") == f * h);
    // DeepseekV3TopkRouter is not an nn.Linear in either layout; its e_score_correction_bias
    // is a buffer.
    CHECK(numel_of(m, "layers.3.mlp.gate") == 256 * h);
    CHECK_FALSE(m.shape().router_linear);
    nlohmann::json no_shared = load_json_file(data_path("DeepSeek-R1.json"));
    no_shared["n_shared_experts"] = nullptr;
    CHECK_THAT(input_error_of([&] { model_from_hf_config(no_shared, "r1.json"); }),
               Catch::Contains("r1.json: /n_shared_experts: null: DeepseekV3MoE sizes"));
    const Model v4 = load_model(data_path("DeepSeek-R1.json"), 4);
    CHECK(v4.num_params() == m.num_params());
    CHECK(numel_of(v4, "layers.3.mlp.experts.255.down_proj") == f * h);
    CHECK_FALSE(v4.shape().router_linear);
  }
  SECTION("gpt-oss-20b and -120b: 3D experts with biases, a router with a bias, sinks") {
    // The gpt-oss model card's totals, 20.91B and 116.83B, and active parameters without the
    // embedding, 3.61B and 5.13B.
    const std::string file = data_path("gpt-oss-20b.json");
    Model m = load_model(file);
    const int64_t h = 2880, f = 2880, vh = 201088LL * h;
    const int64_t expert = h * 2 * f + 2 * f + f * h + h;  // gate_up, its bias, down, its bias
    CHECK(m.num_params() == 20'914'757'184);
    CHECK(m.active_params() - vh == 3'608'307'264);
    CHECK(m.active_params() == m.num_params() - 24LL * 28 * expert);
    CHECK(numel_of(m, "layers.0.mlp.experts") == 32 * expert);
    CHECK(numel_of(m, "layers.0.mlp.router") == 32 * h + 32);
    CHECK(numel_of(m, "layers.0.self_attn") == 64);  // the sinks, one per head
    CHECK(numel_of(m, "layers.0.self_attn.q_proj") == h * 4096 + 4096);
    CHECK(numel_of(m, "layers.0.self_attn.o_proj") == 4096 * h + h);
    CHECK(m.shape().moe_block_class_name() == "GptOssMLP");
    CHECK(m.shape().attention_sinks);
    CHECK_FALSE(m.shape().router_linear);
    CHECK_FALSE(m.shape().expert_loop);
    // transformers 4.x: the same 3D tensors, run by a loop over the experts: a GEMM on each
    // expert's slice, 2 x 32 of them, all on the one experts module.
    Model v4 = load_model(file, 4);
    CHECK(v4.num_params() == m.num_params());
    CHECK(v4.shape().expert_loop);
    int loop_gemms = 0;
    const Layer& block = v4.layers()[1];
    for (const ComputeOp& op : block.ops) {
      if (op.kind != OpKind::kGemm || op.token_factor == 1) continue;
      ++loop_gemms;
      CHECK(op.token_factor == Approx(4.0 / 32));
      CHECK(block.modules[op.module].name == "layers.0.mlp.experts");
    }
    CHECK(loop_gemms == 64);
    CHECK(v4.layer_forward_flops(1, 1024, 1) == Approx(m.layer_forward_flops(1, 1024, 1)));
    nlohmann::json big = load_json_file(file);
    big["num_hidden_layers"] = 36;
    big["num_local_experts"] = 128;
    Model large = model_from_hf_config(big, "gpt-oss-120b.json");
    CHECK(large.num_params() == 116'829'156'672);
    CHECK(large.active_params() - vh == 5'132'849'472);
  }
  SECTION("Gemma-2-9b: head_dim 256, sandwich norms, tied by default") {
    Model m = load_model(data_path("gemma-2-9b.json"));
    CHECK(m.num_params() == 9'241'705'984);
    CHECK(m.shape().tied_embeddings);
    CHECK(find_module(m, "layers.0.pre_feedforward_layernorm") != nullptr);
    CHECK(find_module(m, "layers.0.post_feedforward_layernorm") != nullptr);
    CHECK(numel_of(m, "layers.0.self_attn.q_proj") == 3584 * 16 * 256);
  }
  SECTION("Gemma-7b: head_dim 256 with 16 heads (A = 4096 != h = 3072), tied by default") {
    // google/gemma-7b's config.json values (tie_word_embeddings absent: GemmaConfig ties).
    Model m = model_from_hf_config(parse_json_text(R"({"model_type": "gemma",
      "hidden_size": 3072, "intermediate_size": 24576, "num_hidden_layers": 28,
      "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256,
      "vocab_size": 256000, "max_position_embeddings": 8192, "hidden_act": "gelu"})", "c"),
                                   "c");
    CHECK(m.num_params() == 8'537'680'896);
    CHECK(m.shape().tied_embeddings);
  }
  SECTION("Gemma-3-4b's language model: sandwich norms and per-head q/k norms, tied") {
    // google/gemma-3-4b-it's text_config (model_type gemma3_text). The Gemma 3 technical report
    // gives 4B = 417M vision encoder + 675M embedding + 3,209M non-embedding parameters: the
    // blocks and final norm here are 3,209,010,688.
    Model m = model_from_hf_config(parse_json_text(R"({"model_type": "gemma3_text",
      "attention_bias": false, "attn_logit_softcapping": null, "final_logit_softcapping": null,
      "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2560,
      "intermediate_size": 10240, "max_position_embeddings": 131072, "num_attention_heads": 8,
      "num_hidden_layers": 34, "num_key_value_heads": 4, "query_pre_attn_scalar": 256,
      "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024,
      "sliding_window_pattern": 6, "vocab_size": 262208})", "c"),
                                   "c");
    CHECK(m.shape().tied_embeddings);
    CHECK(m.num_params() - 262208LL * 2560 == 3'209'010'688);
    CHECK(numel_of(m, "layers.0.self_attn.q_norm") == 256);
    CHECK(numel_of(m, "layers.0.self_attn.k_norm") == 256);
    CHECK(find_module(m, "layers.0.pre_feedforward_layernorm") != nullptr);
    CHECK(find_module(m, "layers.0.post_feedforward_layernorm") != nullptr);
    CHECK(m.shape().attn_logit_softcapping == 0);
    CHECK(m.shape().final_logit_softcapping == 0);
  }
  SECTION("Phi-3-mini-4k: fused qkv_proj and gate_up_proj") {
    Model m = load_model(data_path("Phi-3-mini-4k-instruct.json"));
    CHECK(m.num_params() == 3'821'079'552);
    CHECK(numel_of(m, "layers.0.self_attn.qkv_proj") == 3072 * 3 * 3072);
    CHECK(numel_of(m, "layers.0.mlp.gate_up_proj") == 3072 * 2 * 8192);
  }
  SECTION("Qwen3-8B: per-head q/k norms, head_dim 128") {
    Model m = load_model(data_path("Qwen3-8B.json"));
    CHECK(m.num_params() == 8'190'735'360);
  }
  SECTION("OLMo-2-1124-7B: full-width q/k norms, norms after each sublayer only") {
    Model m = load_model(data_path("OLMo-2-1124-7B.json"));
    CHECK(m.num_params() == 7'298'617'344);
    CHECK(numel_of(m, "layers.0.self_attn.q_norm") == 4096);
    CHECK(find_module(m, "layers.0.input_layernorm") == nullptr);
    CHECK(find_module(m, "layers.0.post_feedforward_layernorm") != nullptr);
  }
  SECTION("Olmo-3-1025-7B: OLMo-2's modules; its sliding-window layers add no parameter") {
    Model m = load_model(data_path("Olmo-3-1025-7B.json"));
    // OLMo-2-1124-7B less the 74 rows of its larger vocabulary, in the embedding and the head.
    CHECK(m.num_params() == 7'298'617'344 - 2 * 74 * 4096);
    CHECK(m.num_params() == 7'298'011'136);
    CHECK(numel_of(m, "layers.0.self_attn.k_norm") == 4096);
    CHECK(find_module(m, "layers.0.input_layernorm") == nullptr);
    CHECK(find_module(m, "layers.3.post_attention_layernorm") != nullptr);
  }
  SECTION("EXAONE-4.0-32B: OLMo-2's post-norm block with per-head q/k norms") {
    Model m = load_model(data_path("EXAONE-4.0-32B.json"));
    // The model card's "30.95B without embeddings": all but the embedding and the LM head.
    CHECK(m.num_params() - 2 * 102'400 * 5120 == 30'954'640'384);
    CHECK(numel_of(m, "layers.0.self_attn.q_norm") == 128);
    CHECK(numel_of(m, "layers.0.self_attn.k_proj") == 5120 * 8 * 128);
    CHECK(find_module(m, "layers.0.input_layernorm") == nullptr);
    CHECK(find_module(m, "layers.63.post_feedforward_layernorm") != nullptr);
  }
  SECTION("Qwen-7B (v1, remote code): QWenBlock's names, c_attn biased, w2 the gate") {
    Model m = load_model(data_path("Qwen-7B.json"));
    // The checkpoint index's total_size, 15,442,649,088 bf16 bytes.
    CHECK(m.num_params() == 15'442'649'088 / 2);
    const int64_t h = 4096, f = 11008;
    CHECK(numel_of(m, "h.0.attn.c_attn") == h * 3 * h + 3 * h);
    CHECK(numel_of(m, "h.0.attn.c_proj") == h * h);
    CHECK(numel_of(m, "h.31.mlp.w2") == h * f);
    CHECK(numel_of(m, "h.31.mlp.c_proj") == f * h);
    CHECK(numel_of(m, "h.0.ln_2") == h);
    CHECK(numel_of(m, "ln_f") == h);
    CHECK(find_module(m, "layers.0.input_layernorm") == nullptr);
    // ZeRO-3 fetches in forward order: QWenMLP runs w1 before w2.
    const Layer& block = m.layers()[1];
    auto index = [&](const std::string& name) {
      for (size_t i = 0; i < block.modules.size(); ++i) {
        if (block.modules[i].name == name) return static_cast<int>(i);
      }
      return -1;
    };
    CHECK(index("h.0.mlp.w1") >= 0);
    CHECK(index("h.0.mlp.w1") < index("h.0.mlp.w2"));
    CHECK(m.shape().default_seq_len == 8192);  // seq_length
    CHECK_FALSE(m.shape().eager_softmax_upcast());
  }
  SECTION("GPT-J-6B: parallel block from one ln_1, biased MLP and LM head") {
    Model m = load_model(data_path("gpt-j-6b.json"));
    // transformers' GPTJForCausalLM module count; the model card's 6,053,381,344 counts the
    // original JAX checkpoint (see SOURCES.md).
    CHECK(m.num_params() == 6'050'882'784);
    const int64_t h = 4096, f = 16384, v = 50400;
    CHECK(m.num_params() ==
          28 * (2 * h + 4 * h * h + h * f + f + f * h + h) + v * h + 2 * h + v * h + v);
    CHECK(m.shape().family == Family::kGptj);
    CHECK(find_module(m, "h.0.ln_2") == nullptr);
  }
  SECTION("Falcon-7B: multi-query fused qkv, one norm for the parallel block, tied") {
    Model m = load_model(example_path("falcon-7b.json"));
    // The checkpoint index's total_size, 14,434,379,520 bf16 bytes = 7,217,189,760 tensors
    // elements, stores the tied lm_head.weight a second time (65024 * 4544 = 295,469,056).
    CHECK(m.num_params() == 14'434'379'520 / 2 - 65'024LL * 4544);
    CHECK(numel_of(m, "h.0.self_attention.query_key_value") == 4544 * (4544 + 2 * 64));
    CHECK(numel_of(m, "h.0.input_layernorm") == 2 * 4544);
    CHECK(m.shape().kv_heads == 1);
  }
}

TEST_CASE("2025 families: parameter counts exactly as published", "[models]") {
  // Each: zplan's count == the published total (tests/models/data/SOURCES.md), and the modules
  // that make each type differ from Llama.
  SECTION("Granite-3.1-8B: Llama's modules, tied by the checkpoint") {
    Model m = load_model(data_path("granite-3.1-8b-instruct.json"));
    CHECK(m.num_params() == 8'170'848'256);
    CHECK(m.shape().tied_embeddings);
    nlohmann::json c = load_json_file(data_path("granite-3.1-8b-instruct.json"));
    c["attention_bias"] = true;
    c["mlp_bias"] = true;
    const Model biased = model_from_hf_config(c, "g.json");
    // attention_bias: q, k, v and o_proj; mlp_bias: gate, up and down (LlamaAttention's rule).
    CHECK(biased.num_params() - m.num_params() ==
          40LL * (4096 + 2 * 1024 + 4096 + 2 * 12800 + 4096));
  }
  SECTION("SmolLM3-3B: tied by SmolLM3Config's default, 4 key/value heads") {
    Model m = load_model(data_path("SmolLM3-3B.json"));
    CHECK(m.num_params() == 3'075'098'624);
    CHECK(m.shape().kv_heads == 4);
  }
  SECTION("ERNIE-4.5-0.3B: head_dim 128 with hidden 1024, use_bias on every Linear") {
    Model m = load_model(data_path("ERNIE-4.5-0.3B-PT.json"));
    CHECK(m.num_params() == 360'748'032);
    CHECK(numel_of(m, "layers.0.self_attn.q_proj") == 1024 * 16 * 128);
    nlohmann::json c = load_json_file(data_path("ERNIE-4.5-0.3B-PT.json"));
    c["use_bias"] = true;
    CHECK(model_from_hf_config(c, "e.json").num_params() - m.num_params() ==
          18LL * (2048 + 2 * 256 + 1024 + 2 * 3072 + 1024));
  }
  SECTION("Seed-OSS-36B: q/k/v biases by default, o_proj without") {
    Model m = load_model(data_path("Seed-OSS-36B-Instruct.json"));
    CHECK(m.num_params() == 36'151'104'512);
    CHECK(numel_of(m, "layers.0.self_attn.q_proj") == 5120 * 10240 + 10240);
    CHECK(numel_of(m, "layers.0.self_attn.o_proj") == 10240 * 5120);
  }
  SECTION("GLM-4-9B-0414: GLM's sandwich of four norms, one gate_up_proj, q/k/v biases") {
    Model m = load_model(data_path("GLM-4-9B-0414.json"));
    CHECK(m.num_params() == 9'400'279'040);
    CHECK(numel_of(m, "layers.0.mlp.gate_up_proj") == 4096 * 2 * 13696);
    CHECK(numel_of(m, "layers.0.self_attn.q_proj") == 4096 * 4096 + 4096);
    CHECK(numel_of(m, "layers.0.self_attn.o_proj") == 4096 * 4096);
    for (const char* norm : {"input_layernorm", "post_self_attn_layernorm",
                             "post_attention_layernorm", "post_mlp_layernorm"}) {
      CHECK(find_module(m, std::string("layers.0.") + norm) != nullptr);
    }
    CHECK(find_module(m, "layers.0.pre_feedforward_layernorm") == nullptr);
  }
  SECTION("OLMoE-1B-7B: 64 experts top 8, full-width q/k norms, pre-norm") {
    Model m = load_model(data_path("OLMoE-1B-7B-0924.json"));
    CHECK(m.num_params() == 6'919'161'856);
    CHECK(m.active_params() == 1'282'017'280);  // the paper's "1.3B active"
    CHECK(numel_of(m, "layers.0.self_attn.q_norm") == 2048);
    CHECK(find_module(m, "layers.0.input_layernorm") != nullptr);
    CHECK(m.shape().moe_block_class_name() == "OlmoeSparseMoeBlock");
    CHECK_FALSE(m.shape().router_linear);  // OlmoeTopKRouter under transformers 5
    const Model v4 = load_model(data_path("OLMoE-1B-7B-0924.json"), 4);
    CHECK(v4.num_params() == m.num_params());
    CHECK(v4.shape().router_linear);  // 4.x: gate = nn.Linear(h, E)
    CHECK(numel_of(v4, "layers.0.mlp.experts.63.down_proj") == 1024 * 2048);
  }
  SECTION("Llama 4 Scout and Maverick: every expert on every token, interleaved MoE blocks") {
    // The language models of the Hub's 108,641,793,536 and 401,583,781,376, less the vision
    // tower and projector (871,932,416 each; SOURCES.md).
    Model scout = load_model(data_path("Llama-4-Scout-17B-16E-text_config.json"));
    CHECK(scout.num_params() + 871'932'416 == 108'641'793'536);
    CHECK(scout.active_params() == 17'172'894'720);
    CHECK(numel_of(scout, "layers.0.feed_forward.router") == 16 * 5120);
    CHECK(scout.shape().router_linear);  // Llama4Router is an nn.Linear
    CHECK(numel_of(scout, "layers.0.feed_forward.shared_expert.down_proj") == 8192 * 5120);
    CHECK(numel_of(scout, "layers.0.feed_forward.experts") == 16LL * 3 * 5120 * 8192);
    // The experts' FLOPs are all 16 experts' on every token: one bmm each way.
    int bmms = 0;
    for (const ComputeOp& op : scout.layers()[1].ops) {
      if (!op.batched) continue;
      ++bmms;
      CHECK(op.token_factor == 16);
      CHECK(op.groups == 16);
    }
    CHECK(bmms == 2);
    Model maverick = load_model(data_path("Llama-4-Maverick-17B-128E-text_config.json"), 4);
    CHECK(maverick.num_params() + 871'932'416 == 401'583'781'376);
    CHECK(maverick.active_params() == 17'184'691'200);
    CHECK(numel_of(maverick, "layers.0.feed_forward.down_proj") == 16384 * 5120);  // dense
    CHECK(numel_of(maverick, "layers.1.feed_forward.experts") == 128LL * 3 * 5120 * 8192);
    CHECK(find_module(maverick, "layers.2.feed_forward.router") == nullptr);
    nlohmann::json c = load_json_file(data_path("Llama-4-Maverick-17B-128E-text_config.json"));
    c["moe_layers"] = {0, 2};
    CHECK(input_error_of([&] { model_from_hf_config(c, "mav.json"); }) ==
          "mav.json: /moe_layers: not modelled: experts in blocks other than every n-th (the "
          "list starts at block 0, so n = 1, but block 1 is missing)");
    // transformers asks `layer_idx in moe_layers` and ignores the step when the list is given:
    // order and repeats do not matter, an empty list is the dense model.
    nlohmann::json sc = load_json_file(data_path("Llama-4-Scout-17B-16E-text_config.json"));
    sc["moe_layers"] = nlohmann::json::array();
    for (int i = 47; i >= 0; --i) sc["moe_layers"].push_back(i);
    sc["moe_layers"].push_back(3);
    sc["interleave_moe_layer_step"] = 0;
    CHECK(model_from_hf_config(sc, "s.json").num_params() == scout.num_params());
    sc["moe_layers"] = nlohmann::json::array();
    Model dense = model_from_hf_config(sc, "s.json");
    CHECK_FALSE(dense.shape().moe());
    CHECK(numel_of(dense, "layers.0.feed_forward.down_proj") == 16384 * 5120);
    sc["moe_layers"] = {0, 48};
    CHECK(input_error_of([&] { model_from_hf_config(sc, "s.json"); }) ==
          "s.json: /moe_layers: entry 1 must be a block index (0 to 47), got 48");
    sc["moe_layers"] = "all";
    CHECK(input_error_of([&] { model_from_hf_config(sc, "s.json"); }) ==
          "s.json: /moe_layers: must be a list of block indices, got \"all\"");
    sc["use_qk_norm"] = "true";
    CHECK_THAT(input_error_of([&] { model_from_hf_config(sc, "s.json"); }),
               Catch::StartsWith("s.json: /use_qk_norm: must be true or false"));
    sc.erase("use_qk_norm");
    // Sizes within their bounds whose product is absurd are refused before a count overflows.
    nlohmann::json huge = sc;
    huge.erase("moe_layers");
    for (const char* k : {"num_local_experts", "intermediate_size", "hidden_size"}) {
      huge[k] = 1 << 20;
    }
    huge["num_attention_heads"] = huge["num_key_value_heads"] = 8192;
    huge["interleave_moe_layer_step"] = 1;
    CHECK(input_error_of([&] { model_from_hf_config(huge, "h.json"); }) ==
          "h.json: the model would have 1.66e+20 parameters; zplan plans models of up to 1e+15");
    // A null vision_config is no vision tower.
    sc.erase("moe_layers");
    sc["interleave_moe_layer_step"] = 1;
    sc["vision_config"] = nullptr;
    CHECK(model_from_hf_config(sc, "s.json").num_params() == scout.num_params());
  }
  SECTION("GLM-4.5-Air and GLM-4.5: routed and shared experts, dense blocks first, no MTP") {
    // The Hub's totals (110,468,824,832 and 358,337,791,296) count the multi-token-prediction
    // layer transformers does not build and the routers' e_score_correction_bias buffers; less
    // those, the count transformers builds (SOURCES.md has the arithmetic).
    Model air = load_model(data_path("GLM-4.5-Air.json"));
    CHECK(air.num_params() == 106'852'245'504);
    CHECK(air.num_params() + 2'375'059'456 + 2 * 151'552LL * 4096 + 46 * 128 ==
          110'468'824'832);
    CHECK(air.active_params() == 13'424'123'904);
    CHECK(air.shape().moe_block_class_name() == "Glm4MoeMoE");
    CHECK_FALSE(air.shape().router_linear);  // Glm4MoeTopkRouter, in both layouts
    CHECK(numel_of(air, "layers.0.mlp.down_proj") == 10944 * 4096);  // the dense block
    CHECK(numel_of(air, "layers.1.mlp.gate") == 128 * 4096);
    CHECK(numel_of(air, "layers.1.mlp.shared_experts.down_proj") == 1408 * 4096);
    CHECK(numel_of(air, "layers.1.mlp.experts") == 128LL * 3 * 1408 * 4096);
    CHECK(find_module(air, "layers.1.self_attn.q_norm") == nullptr);  // use_qk_norm false
    Model glm45 = load_model(data_path("GLM-4.5.json"), 4);
    CHECK(glm45.num_params() == 352'797'814'784);
    CHECK(glm45.active_params() == 33'632'251'904);
    CHECK(numel_of(glm45, "layers.3.self_attn.q_norm") == 128);  // use_qk_norm: per head
    CHECK(numel_of(glm45, "layers.3.mlp.experts.159.down_proj") == 1536 * 5120);
    CHECK_FALSE(glm45.shape().router_linear);
    nlohmann::json c = load_json_file(data_path("GLM-4.5-Air.json"));
    c["first_k_dense_replace"] = 47;
    CHECK_THAT(input_error_of([&] { model_from_hf_config(c, "air.json"); }),
               Catch::Contains("air.json: /first_k_dense_replace: must be at most"));
    // Every block dense: no MoE module, so a dense model of the same attention and MLPs.
    c["first_k_dense_replace"] = 46;
    Model all_dense = model_from_hf_config(c, "air.json");
    CHECK_FALSE(all_dense.shape().moe());
    CHECK(numel_of(all_dense, "layers.45.mlp.down_proj") == 10944 * 4096);
    CHECK(all_dense.active_params() == all_dense.num_params());
    // GLM-4.5's heads (96) do not split hidden_size 5120: a config that lost head_dim is
    // refused by that key, not by num_attention_heads.
    nlohmann::json no_head_dim = load_json_file(data_path("GLM-4.5.json"));
    no_head_dim.erase("head_dim");
    CHECK(input_error_of([&] { model_from_hf_config(no_head_dim, "glm.json"); }) ==
          "glm.json: /head_dim: absent or null, and num_attention_heads (96) does not divide "
          "hidden_size (5120): give head_dim, the width of one attention head");
  }
}

TEST_CASE("MoE: FLOPs count the routed experts a token visits, memory counts all", "[models]") {
  Model m = load_model(example_path("Mixtral-8x7B-v0.1.json"), 4);
  const int64_t h = 4096, f = 14336, s = 4096;
  // Forward FLOPs of one block per token: attention GEMMs, the router, two of eight experts.
  const double per_token_gemm =
      2.0 * (2 * h * h + 2 * h * 1024) + 2.0 * 8 * h + 2.0 * 2 * 3 * h * f;
  const double attention = 4.0 * s * 32 * 128;
  CHECK(m.layer_forward_flops(1, s, 1) == Approx(s * (per_token_gemm + attention)));
  // Each expert's Linears are modules of their own (transformers 4.x), so DeepSpeed's
  // largest_layer_params is the embedding (32000 x h), above one expert Linear (h x f).
  CHECK(m.largest_module_params() == 32000LL * h);
  // The loop over the experts: one GEMM per expert Linear, each over k / E of the tokens.
  int expert_gemms = 0;
  for (const ComputeOp& op : m.layers()[1].ops) {
    if (op.kind == OpKind::kGemm && op.token_factor != 1) {
      ++expert_gemms;
      CHECK(op.token_factor == Approx(2.0 / 8));
    }
  }
  CHECK(expert_gemms == 24);
  ActivationOptions o;
  LayerActivations a = m.layer_activations(1, 1024, 1, o);
  // Dense Mistral-7B's block: 2*T*(4h + 2A + 2G + 4f) + 4*a*T; the MoE block adds the router
  // logits and, per routed copy, 2h + 4f minus the one dense MLP.
  Model dense = load_model(example_path("Mistral-7B-v0.1.json"));
  LayerActivations d = dense.layer_activations(1, 1024, 1, o);
  CHECK(a.stored_bytes - d.stored_bytes == Approx(2.0 * 1024 * (8 + 2 * (2 * h + 4 * f) - 4 * f)));

  // transformers 5 (the default): the same FLOPs and activations; the experts are one module
  // (MixtralExperts), DeepSpeed's largest layer, run as two grouped GEMMs over all routed rows.
  Model v5 = load_model(example_path("Mixtral-8x7B-v0.1.json"));
  CHECK(v5.shape().fused_experts);
  CHECK(v5.layer_forward_flops(1, s, 1) == Approx(m.layer_forward_flops(1, s, 1)));
  CHECK(v5.layer_activations(1, 1024, 1, o).stored_bytes == Approx(a.stored_bytes));
  CHECK(v5.largest_module_params() == 8LL * 3 * h * f);
  int grouped = 0;
  for (const ComputeOp& op : v5.layers()[1].ops) {
    if (op.kind != OpKind::kGemm || op.token_factor == 1) continue;
    ++grouped;
    CHECK(op.token_factor == Approx(2.0));
    CHECK(op.groups == 8);
    CHECK_FALSE(op.peft_linear);
  }
  CHECK(grouped == 2);
  CHECK(find_module(v5, "layers.0.mlp.experts") != nullptr);
  CHECK(find_module(v5, "layers.0.block_sparse_moe.gate") == nullptr);
}

TEST_CASE("MLA: attention FLOPs from the query/key and value head dims", "[models]") {
  Model m = load_model(data_path("DeepSeek-V2-Lite.json"));
  const Layer& block = m.layers()[1];
  bool found = false;
  for (const ComputeOp& op : block.ops) {
    if (op.kind != OpKind::kAttention) continue;
    found = true;
    CHECK(op.heads == 16);
    CHECK(op.head_dim == 192);
    CHECK(op.value_dim == 128);
  }
  CHECK(found);
  // QK^T over 192 dims and AV over 128: 2*T*s*a*(192 + 128).
  const int64_t s = 2048;
  double gemms = 2.0 * 2048 * (16 * 192 + 576) + 2.0 * 512 * 16 * 256 + 2.0 * 16 * 128 * 2048 +
                 2.0 * 3 * 2048 * 10944;
  CHECK(m.layer_forward_flops(1, s, 1) == Approx(s * (gemms + 2.0 * s * 16 * (192 + 128))));
}

TEST_CASE("block activations follow each family's tensors", "[models]") {
  ActivationOptions o;  // flash attention, 16-bit
  const double T = 1024;
  auto stored = [&](const Model& m, double elements) {
    return 2 * T * elements + 4.0 * static_cast<double>(m.shape().heads) * T;
  };
  // GPT-J: one ln_1 keeps the block input once and feeds both GEMM groups: h + h + 3h (Q, K, V)
  // + h (attention output) + 2f (GeLU input and output), and gelu_new's Python formula keeps
  // tanh's output and the last product's two factors, 3f more.
  Model gptj = load_model(data_path("gpt-j-6b.json"));
  CHECK(gptj.layer_activations(1, 1024, 1, o).stored_bytes ==
        Approx(stored(gptj, 6 * 4096.0 + 5 * 16384.0)));
  // The same shape with F.gelu ("gelu", one kernel) keeps the 2f alone.
  {
    ModelShape plain = gptj.shape();
    plain.gelu_formula = false;
    const Model one_kernel = build_model(plain, "gpt-j-6b, gelu");
    CHECK(gptj.layer_activations(1, 1024, 1, o).stored_bytes -
              one_kernel.layer_activations(1, 1024, 1, o).stored_bytes ==
          Approx(2 * T * 3 * 16384.0));
  }
  // RMSNorm families also keep each norm input's fp32 copy (Hugging Face's RMSNorm): 4 bytes
  // per element of every norm input.
  auto upcast = [&](double norm_elements) { return 4 * T * norm_elements; };
  // Gemma's and OLMo-2's norms apply the weight to the fp32 normalized tensor and save it: 4 + 4
  // bytes where the count charges 2.
  auto upcast_fp32_weight = [&](double norm_elements) { return 6 * T * norm_elements; };
  // Gemma-2: four norms keep their inputs (4h), two GEMM inputs (2h), Q + K + V, output, 4f.
  Model gemma = load_model(data_path("gemma-2-9b.json"));
  const double A = 16 * 256, G = 8 * 256;
  CHECK(gemma.layer_activations(1, 1024, 1, o).stored_bytes ==
        Approx(stored(gemma, 6 * 3584.0 + A + 2 * G + A + 4 * 14336.0) +
               upcast_fp32_weight(4 * 3584.0)));
  // OLMo-2: two post-sublayer norms (2h), the GEMMs read the residual stream (2h), q/k norms
  // keep their inputs (A + G).
  Model olmo = load_model(data_path("OLMo-2-1124-7B.json"));
  CHECK(olmo.layer_activations(1, 1024, 1, o).stored_bytes ==
        Approx(stored(olmo, 4 * 4096.0 + 4 * 4096.0 + 2 * 4096.0 + 4 * 11008.0) +
               upcast_fp32_weight(2 * 4096.0 + 2 * 4096.0)));
  // DeepSeek-V2-Lite's dense block: Q and K a*(nope + rope), V and output a*v, the kv latent's
  // norm input and output and the rope key (2*512 + 64); the norms read 2h and the kv latent.
  Model ds = load_model(data_path("DeepSeek-V2-Lite.json"));
  CHECK(ds.layer_activations(1, 1024, 1, o).stored_bytes ==
        Approx(stored(ds, 4 * 2048.0 + 2 * 16 * 192.0 + 2 * 16 * 128.0 + 2 * 512 + 64 +
                              4 * 10944.0) +
               upcast(2 * 2048.0 + 512)));
}

TEST_CASE("unsupported settings of the new families are refused by key", "[models]") {
  // Gemma-3's multimodal config: the vision tower is not modelled, its language model is.
  CHECK(error_of(R"({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text"},
    "vision_config": {"model_type": "siglip_vision_model"}})") ==
        "config.json: /vision_config: not modelled: Gemma-3's vision tower "
        "(Gemma3ForConditionalGeneration); to plan the language model alone (Gemma3ForCausalLM), "
        "save this file's text_config as a file of its own (its model_type is gemma3_text)");
  CHECK(error_of(R"({"model_type": "gemma3_text", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
    "use_bidirectional_attention": true})") ==
        "config.json: /use_bidirectional_attention: not modelled: bidirectional attention "
        "(EmbeddingGemma: every token attends to every other, not causally)");
  const std::string qwen_moe = R"({"model_type": "qwen2_moe", "hidden_size": 64,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
    "intermediate_size": 128, "vocab_size": 100, "num_experts": 4, "num_experts_per_tok": 2)";
  CHECK(error_of(qwen_moe + R"(, "decoder_sparse_step": 2})") ==
        "config.json: /decoder_sparse_step: not modelled: experts in every "
        "decoder_sparse_step-th block only (zplan builds them in every block: must be 1)");
  CHECK(error_of(qwen_moe + R"(, "mlp_only_layers": [0]})") ==
        "config.json: /mlp_only_layers: not modelled: dense MLPs in chosen blocks (zplan builds "
        "experts in every block: must be empty)");
  CHECK(error_of(R"({"model_type": "qwen3_moe", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 128,
    "vocab_size": 100, "num_experts": 4, "num_experts_per_tok": 5})")
            .find(
            "must be at most the number of experts (4), got 5") != std::string::npos);
  // A null MoE size is no default: the config class keeps None and the model cannot build.
  CHECK(error_of(qwen_moe + R"(, "moe_intermediate_size": null})") ==
        "config.json: /moe_intermediate_size: null: transformers cannot build the model with "
        "None here; give a number, or leave the key out for the default (1408)");
  CHECK_THAT(error_of(qwen_moe + R"(, "decoder_sparse_step": null})"),
             Catch::StartsWith("config.json: /decoder_sparse_step: null:"));
  CHECK_THAT(error_of(R"({"model_type": "glm4_moe", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 16, "intermediate_size": 128,
    "vocab_size": 100, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "first_k_dense_replace": null})"),
             Catch::StartsWith("config.json: /first_k_dense_replace: null:"));
  CHECK_THAT(error_of(R"({"model_type": "olmoe", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
    "num_experts": null})"),
             Catch::StartsWith("config.json: /num_experts: null:"));
  CHECK(model_from_hf_config(parse_json_text(qwen_moe + R"(, "mlp_only_layers": []})", "c"), "c")
            .shape()
            .experts == 4);

  const std::string ds = R"({"model_type": "deepseek_v2", "hidden_size": 64,
    "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
    "vocab_size": 100, "kv_lora_rank": 16, "q_lora_rank": 32, "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8, "v_head_dim": 8, "moe_intermediate_size": 16)";
  CHECK(error_of(ds + "}") ==
        "config.json: /n_routed_experts: missing (expected an integer)");
  CHECK(error_of(ds + R"(, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "first_k_dense_replace": 3})") ==
        "config.json: /first_k_dense_replace: must be at most num_hidden_layers (2), got 3");
  CHECK(error_of(ds + R"(, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "num_nextn_predict_layers": 1})") ==
        "config.json: /num_nextn_predict_layers: not modelled: multi-token-prediction layers");
  CHECK(error_of(R"({"model_type": "gptj", "n_embd": 64, "n_layer": 2, "n_head": 4,
    "vocab_size": 100, "tie_word_embeddings": true})") ==
        "config.json: /tie_word_embeddings: not modelled: a tied GPT-J head (its lm_head has a "
        "bias)");
  CHECK(error_of(R"({"model_type": "falcon", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "vocab_size": 100, "new_decoder_architecture": true,
    "num_kv_heads": 3})") ==
        "config.json: /num_kv_heads: must divide num_attention_heads (4), got 3");
}

TEST_CASE("zplan model files take the general decoder's fields", "[models]") {
  Model m = model_from_zplan_json(parse_json_text(R"({"family": "llama", "layers": 2,
    "hidden": 64, "heads": 4, "ffn": 128, "vocab": 100, "experts": 4, "experts_per_token": 2,
    "expert_ffn": 32, "shared_expert_ffn": 16, "dense_layers": 1, "qk_norm": "per_head",
    "post_sublayer_norm": true})", "m.json"), "m.json");
  const int64_t h = 64;
  const int64_t attn = 4 * h * h + 2 * 16 + 4 * h;  // q/k/v/o, q/k norms, four norms
  CHECK(m.num_params() == attn + 3 * h * 128 + attn + (4 * h + 4 * 3 * h * 32 + 3 * h * 16) +
                              2 * 100 * h + h);
  CHECK(m.active_params() == m.num_params() - 2 * 3 * h * 32);
  CHECK(input_error_of([] {
          model_from_zplan_json(parse_json_text(R"({"family": "gpt", "layers": 1, "hidden": 8,
            "heads": 2, "ffn": 8, "vocab": 10, "max_positions": 4, "experts": 2})", "m.json"),
                                "m.json");
        }) == "m.json: /family: fused projections, q/k norms, experts, latent attention and "
              "Qwen v1's modules are built for the llama family (gated-MLP decoders) only");
  CHECK(input_error_of([] {
          model_from_zplan_json(parse_json_text(R"({"family": "llama", "layers": 1, "hidden": 8,
            "heads": 2, "ffn": 8, "vocab": 10, "experts_per_token": 2})", "m.json"), "m.json");
        }) == "m.json: /experts: expert settings given without experts (experts must be > 0)");
}

TEST_CASE("q_lora_rank: a number adds the query bottleneck, null or absent differ", "[models]") {
  const std::string ds = R"({"model_type": "deepseek_v2", "hidden_size": 64,
    "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 128,
    "vocab_size": 100, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
    "v_head_dim": 8, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 16)";
  Model with = model_from_hf_config(parse_json_text(ds + R"(, "q_lora_rank": 32})", "c"), "c");
  CHECK(numel_of(with, "layers.0.self_attn.q_a_proj") == 64 * 32);
  CHECK(numel_of(with, "layers.0.self_attn.q_a_layernorm") == 32);
  CHECK(numel_of(with, "layers.0.self_attn.q_b_proj") == 32 * 4 * 16);
  Model none = model_from_hf_config(parse_json_text(ds + R"(, "q_lora_rank": null})", "c"), "c");
  CHECK(numel_of(none, "layers.0.self_attn.q_proj") == 64 * 4 * 16);
  // Absent: DeepseekV2Config's default 1536.
  Model absent = model_from_hf_config(parse_json_text(ds + "}", "c"), "c");
  CHECK(absent.shape().q_lora_rank == 1536);
}

}  // namespace
}  // namespace zplan::models
