// Model structure (layers, modules, tensors, ops), forward FLOPs and build_model's checks.
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "models/catalog.h"
#include "models/model.h"
#include "tests/models/test_util.h"

namespace zplan::models {
namespace {

using testing::input_error_of;

std::vector<std::string> module_names(const Layer& layer) {
  std::vector<std::string> names;
  for (const Module& m : layer.modules) names.push_back(m.name);
  return names;
}

const Module& module_named(const Layer& layer, const std::string& name) {
  for (const Module& m : layer.modules) {
    if (m.name == name) return m;
  }
  FAIL("no module " << name << " in " << layer.name);
  return layer.modules.front();
}

// Every op points at a module of its layer or none; a GEMM's weight is n x k.
void check_ops_consistent(const Model& m) {
  for (const Layer& layer : m.layers()) {
    INFO(layer.name);
    CHECK_FALSE(layer.ops.empty());
    for (const ComputeOp& op : layer.ops) {
      INFO(op.name);
      CHECK(op.module >= -1);
      CHECK(op.module < static_cast<int>(layer.modules.size()));
      if (op.kind == OpKind::kGemm) {
        REQUIRE(op.module >= 0);
        CHECK(layer.modules[op.module].params.front().numel == op.n * op.k);
      }
      if (op.kind == OpKind::kMemoryBound) CHECK(op.bytes_per_token > 0);
    }
  }
}

TEST_CASE("GPT layers: embedding, blocks, final norm, tied LM head", "[models]") {
  Model m = load_model("125m");
  const auto& layers = m.layers();
  REQUIRE(layers.size() == 12 + 3);
  CHECK(layers[0].kind == LayerKind::kEmbedding);
  CHECK(module_names(layers[0]) == std::vector<std::string>{"wte", "wpe"});
  for (size_t i = 1; i <= 12; ++i) {
    CHECK(layers[i].kind == LayerKind::kBlock);
    CHECK(layers[i].checkpointed_unit);
  }
  CHECK_FALSE(layers[0].checkpointed_unit);
  CHECK(layers[13].kind == LayerKind::kFinalNorm);
  CHECK(layers[14].kind == LayerKind::kLmHead);
  CHECK(layers[1].name == "h.0");
  CHECK(module_names(layers[1]) ==
        std::vector<std::string>{"h.0.ln_1", "h.0.attn.c_attn", "h.0.attn.c_proj", "h.0.ln_2",
                                 "h.0.mlp.c_fc", "h.0.mlp.c_proj"});
  const Module& c_attn = module_named(layers[1], "h.0.attn.c_attn");
  REQUIRE(c_attn.params.size() == 2);
  CHECK(c_attn.params[0].name == "h.0.attn.c_attn.weight");
  CHECK(c_attn.params[0].numel == 3 * 768 * 768);
  CHECK(c_attn.params[1].name == "h.0.attn.c_attn.bias");
  CHECK(c_attn.params[1].numel == 3 * 768);
  // 12h^2 + 13h per block.
  CHECK(layers[1].numel() == 12 * 768 * 768 + 13 * 768);

  const Layer& head = layers[14];
  REQUIRE(head.modules.size() == 1);
  CHECK(head.modules[0].name == "lm_head");
  CHECK(head.modules[0].tied_to == "wte");
  REQUIRE(head.modules[0].params.size() == 1);
  CHECK(head.modules[0].params[0].name == "wte.weight");
  CHECK(head.modules[0].numel() == 50257 * 768);
  CHECK(head.numel() == 0);  // counted with the embedding
  check_ops_consistent(m);
}

TEST_CASE("GPT block ops in forward order", "[models]") {
  Model m = load_model("125m");
  std::vector<std::string> names;
  for (const ComputeOp& op : m.layers()[1].ops) names.push_back(op.name);
  CHECK(names == std::vector<std::string>{"h.0.ln_1", "h.0.attn.c_attn", "attention",
                                          "h.0.attn.c_proj", "attn_dropout", "attn_residual",
                                          "h.0.ln_2", "h.0.mlp.c_fc", "gelu", "h.0.mlp.c_proj",
                                          "mlp_dropout", "mlp_residual"});
  const ComputeOp& attention = m.layers()[1].ops[2];
  CHECK(attention.kind == OpKind::kAttention);
  CHECK(attention.heads == 12);
  CHECK(attention.head_dim == 64);
  CHECK(attention.module == -1);
  // LayerNorm: native_layer_norm, one kernel that reads and writes one 16-bit row, 4h bytes.
  CHECK(m.layers()[1].ops[0].bytes_per_token == 4 * 768);
  CHECK(m.layers()[1].ops[0].kernels == 1);
  CHECK(m.layers()[1].ops[0].fused.by == FusedBy::kNone);
  const Layer& head = m.layers().back();
  CHECK(head.ops.back().name == "cross_entropy");
  CHECK(head.ops.back().kind == OpKind::kMemoryBound);
}

TEST_CASE("Llama, NeoX and MLP module names", "[models]") {
  Model llama = load_model("llama3-8b");
  CHECK(module_names(llama.layers()[0]) == std::vector<std::string>{"embed_tokens"});
  const Layer& block = llama.layers()[1];
  CHECK(module_names(block) ==
        std::vector<std::string>{"layers.0.input_layernorm", "layers.0.self_attn.q_proj",
                                 "layers.0.self_attn.k_proj", "layers.0.self_attn.v_proj",
                                 "layers.0.self_attn.o_proj", "layers.0.post_attention_layernorm",
                                 "layers.0.mlp.gate_proj", "layers.0.mlp.up_proj",
                                 "layers.0.mlp.down_proj"});
  // GQA: k_proj is h x (g*d) = 4096 x 1024, no bias; RMSNorm has a weight only.
  CHECK(module_named(block, "layers.0.self_attn.k_proj").params.size() == 1);
  CHECK(module_named(block, "layers.0.self_attn.k_proj").numel() == 4096 * 1024);
  CHECK(module_named(block, "layers.0.input_layernorm").numel() == 4096);
  CHECK(module_names(llama.layers()[33]) == std::vector<std::string>{"norm"});
  CHECK(llama.layers()[34].modules[0].name == "lm_head");
  CHECK(llama.layers()[34].modules[0].tied_to.empty());
  CHECK(llama.layers()[34].numel() == 128256 * 4096);
  check_ops_consistent(llama);

  Model neox = load_model("20b");
  CHECK(module_names(neox.layers()[0]) == std::vector<std::string>{"embed_in"});
  CHECK(module_names(neox.layers()[1]) ==
        std::vector<std::string>{"layers.0.input_layernorm", "layers.0.attention.query_key_value",
                                 "layers.0.attention.dense", "layers.0.post_attention_layernorm",
                                 "layers.0.mlp.dense_h_to_4h", "layers.0.mlp.dense_4h_to_h"});
  CHECK(module_names(neox.layers().back()) == std::vector<std::string>{"embed_out"});
  CHECK(neox.layers()[1].ops.back().name == "residual");  // one three-way add
  CHECK(neox.layers()[1].ops.back().bytes_per_token == 8 * 6144);
  check_ops_consistent(neox);

  Model mlp = load_model("tiny-mlp-s");
  REQUIRE(mlp.layers().size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    const Layer& layer = mlp.layers()[i];
    CHECK(layer.kind == LayerKind::kLinear);
    CHECK(layer.checkpointed_unit);
    CHECK(layer.name == "layers." + std::to_string(i));
    REQUIRE(layer.modules.size() == 1);
    CHECK(layer.modules[0].name == layer.name);
    REQUIRE(layer.modules[0].params.size() == 2);
    CHECK(layer.modules[0].params[0].name == layer.name + ".weight");
    CHECK(layer.modules[0].params[0].numel == 256 * 256);
    CHECK(layer.modules[0].params[1].numel == 256);
    REQUIRE(layer.ops.size() == 2);
    CHECK(layer.ops[0].kind == OpKind::kGemm);
    CHECK(layer.ops[1].name == (i < 3 ? "relu" : "mse_loss"));
  }
  check_ops_consistent(mlp);
}

TEST_CASE("forward FLOPs match the closed forms", "[models]") {
  const int64_t s = 2048, b = 2;
  const double T = static_cast<double>(s * b);

  // GPT block (Narayanan et al. 2021): 24h^2 + 4sh per token. 1.3b: h = 2048:
  // 24*2048^2 + 4*2048*2048 = 117,440,512 FLOPs per token.
  Model gpt = load_model("1.3b");
  const double h = 2048;
  CHECK(gpt.layer_forward_flops(1, s, b) == T * (24 * h * h + 4 * s * h));
  CHECK(gpt.layer_forward_flops(1, s, b) == T * 117'440'512.0);
  CHECK(gpt.layer_forward_flops(0, s, b) == 0);  // lookups only
  CHECK(gpt.layer_forward_flops(25, s, b) == 0);  // final norm
  CHECK(gpt.layer_forward_flops(26, s, b) == T * 2 * 50257 * h);  // LM head 2*V*h
  CHECK(gpt.forward_flops(s, b) == 24 * T * (24 * h * h + 4 * s * h) + T * 2 * 50257 * h);

  // NeoX: the same block FLOPs, h = 6144.
  Model neox = load_model("20b");
  CHECK(neox.layer_forward_flops(1, s, b) == T * (24.0 * 6144 * 6144 + 4.0 * s * 6144));

  // Llama block: 2h(h + 2gd) + 2h^2 + 6hf + 4sh per token. llama3-8b: h 4096, g*d 1024,
  // f 14336: 2*4096*(4096 + 2048) + 2*4096^2 + 6*4096*14336 + 4*2048*4096.
  Model llama = load_model("llama3-8b");
  const double lh = 4096, gd = 1024, f = 14336;
  const double per_token = 2 * lh * (lh + 2 * gd) + 2 * lh * lh + 6 * lh * f + 4 * s * lh;
  CHECK(llama.layer_forward_flops(1, s, b) == T * per_token);
  CHECK(llama.forward_flops(s, b) == 32 * T * per_token + T * 2 * 128256 * lh);

  // MLP: 2*T*h^2 per layer, T = rows.
  Model mlp = load_model("tiny-mlp");
  CHECK(mlp.layer_forward_flops(0, 1, 64) == 2.0 * 64 * 1024 * 1024);
  CHECK(mlp.forward_flops(1, 64) == 8 * 2.0 * 64 * 1024 * 1024);
}

ModelShape small_llama() {
  ModelShape s;
  s.name = "t";
  s.family = Family::kLlama;
  s.norm = Norm::kRmsNorm;
  s.activation = Activation::kSwiglu;
  s.layers = 2;
  s.hidden = 256;
  s.heads = 4;
  s.ffn = 512;
  s.vocab = 1000;
  return s;
}

TEST_CASE("build_model fills kv_heads and head_dim, honours an explicit head_dim", "[models]") {
  Model m = build_model(small_llama(), "t");
  CHECK(m.shape().kv_heads == 4);
  CHECK(m.shape().head_dim == 64);

  // Mistral-Nemo style: 8 heads of 48 = 384 != hidden 256. q_proj 256 -> 384, o_proj 384 -> 256.
  ModelShape s = small_llama();
  s.heads = 8;
  s.kv_heads = 2;
  s.head_dim = 48;
  Model wide = build_model(s, "t");
  const Layer& block = wide.layers()[1];
  CHECK(module_named(block, "layers.0.self_attn.q_proj").numel() == 256 * 384);
  CHECK(module_named(block, "layers.0.self_attn.k_proj").numel() == 256 * 96);
  CHECK(module_named(block, "layers.0.self_attn.o_proj").numel() == 384 * 256);
  // Per block: q 256*384 + k,v 2*256*96 + o 384*256 + 3*256*512 + 2*256.
  CHECK(block.numel() == 256 * 384 + 2 * 256 * 96 + 384 * 256 + 3 * 256 * 512 + 2 * 256);
}

TEST_CASE("build_model rejects inconsistent shapes with the field", "[models]") {
  auto error = [](ModelShape s) {
    return input_error_of([&] { build_model(s, "m.json"); });
  };
  ModelShape s = small_llama();
  s.heads = 3;
  CHECK(error(s) == "m.json: /heads: must divide hidden (256), got 3");
  s = small_llama();
  s.kv_heads = 3;
  CHECK(error(s) == "m.json: /kv_heads: must divide heads (4), got 3");
  s = small_llama();
  s.layers = 0;
  CHECK(error(s) == "m.json: /layers: must be a positive integer, got 0");
  s = small_llama();
  s.vocab = -5;
  CHECK(error(s) == "m.json: /vocab: must be a positive integer, got -5");
  s = small_llama();
  s.hidden = int64_t{1} << 40;
  CHECK(error(s) == "m.json: /hidden: must be at most 1048576, got 1099511627776");
  s = small_llama();
  s.max_positions = -1;
  CHECK(error(s) == "m.json: /max_positions: must not be negative, got -1");
  s = small_llama();
  s.activation = Activation::kGelu;
  CHECK(error(s) == "m.json: /activation: the llama family has a gated MLP: must be swiglu");
  s = small_llama();
  s.family = Family::kGpt;
  CHECK(error(s) ==
        "m.json: /activation: swiglu (a gated MLP) is built for the llama family only");
  s = small_llama();
  s.parallel_residual = true;
  s.pre_norm = false;
  CHECK(error(s) ==
        "m.json: /pre_norm: a parallel-residual block normalizes its input: must be true");
  s = small_llama();
  s.default_seq_len = 0;
  CHECK(error(s) == "m.json: /default_seq_len: must be a positive integer, got 0");
}

TEST_CASE("Model counts a tied tensor once", "[models]") {
  // Hand-built: an embedding E (10 x 4) and a head that reuses it.
  Layer embedding{"embedding", LayerKind::kEmbedding, {{"e", {{"e.weight", 40}}, ""}}, {}, false};
  Layer head{"lm_head", LayerKind::kLmHead, {{"lm_head", {{"e.weight", 40}}, "e"}}, {}, false};
  Model m(ModelShape{}, {embedding, head});
  CHECK(m.num_params() == 40);
  CHECK(m.num_param_tensors() == 1);
  CHECK(m.largest_module_params() == 40);
  CHECK(m.largest_param_numel() == 40);
}

TEST_CASE("Hugging Face's RMSNorm and rotary are eager chains with Liger's kernel beside them",
          "[models]") {
  const Model m = load_model("llama3-8b");
  const Layer& block = m.layers()[1];
  auto op = [&](const std::string& name) {
    for (const ComputeOp& o : block.ops) {
      if (o.name.ends_with(name)) return o;
    }
    FAIL("no op " << name);
    return ComputeOp{};
  };
  // LlamaRMSNorm.forward: 8 kernels, 36 bytes per element forward; 14 and 84 in backward.
  const ComputeOp norm = op(".0.input_layernorm");
  CHECK(norm.kernels == 8);
  CHECK(norm.bytes_per_token == 36 * 4096);
  CHECK(norm.backward_kernel_count() == 14);
  CHECK(norm.backward_bytes() == 84 * 4096);
  CHECK(norm.fused.by == FusedBy::kLiger);
  CHECK(norm.fused.bytes_per_token == 4 * 4096);
  // apply_rotary_pos_emb on Q (4096) and K (1024): 5 kernels each, 20 bytes per element.
  const ComputeOp rotary = op("rotary");
  CHECK(rotary.kernels == 10);
  CHECK(rotary.bytes_per_token == 20 * 5120);
  CHECK(rotary.backward_kernel_count() == 18);
  CHECK(rotary.fused.by == FusedBy::kLiger);
  // Liger's SwiGLU: the product's kernel does the SiLU's work.
  CHECK(op("silu").fused.kernels == 0);
  CHECK(op("gate_mul").fused.kernels == 1);
}

TEST_CASE("Gemma's and OLMo-2's RMSNorms apply the weight in fp32", "[models]") {
  // GemmaRMSNorm: output * (1.0 + weight.float()) before type_as, 10 kernels and 40 bytes an
  // element forward, 16 and 96 backward; Olmo2RMSNorm: (weight * x).to(input_dtype), the same
  // bytes without the two per-weight kernels each way (models/eager_ops.cc).
  auto norm_of = [](const std::string& file, const std::string& name) {
    const Model m = load_model(testing::data_path(file));
    for (const ComputeOp& o : m.layers()[1].ops) {
      if (o.name.ends_with(name)) return std::make_pair(o, m.shape().hidden);
    }
    FAIL("no op " << name << " in " << file);
    return std::make_pair(ComputeOp{}, int64_t{0});
  };
  const auto [gemma, gh] = norm_of("gemma-2-9b.json", ".0.input_layernorm");
  CHECK(gemma.kernels == 10);
  CHECK(gemma.bytes_per_token == 40.0 * static_cast<double>(gh));
  CHECK(gemma.backward_kernel_count() == 16);
  CHECK(gemma.backward_bytes() == 96.0 * static_cast<double>(gh));
  const auto [olmo, oh] = norm_of("OLMo-2-1124-7B.json", ".0.post_attention_layernorm");
  CHECK(olmo.kernels == 8);
  CHECK(olmo.bytes_per_token == 40.0 * static_cast<double>(oh));
  CHECK(olmo.backward_kernel_count() == 14);
  CHECK(olmo.backward_bytes() == 96.0 * static_cast<double>(oh));
  // Liger's one kernel replaces either.
  CHECK(gemma.fused.by == FusedBy::kLiger);
  CHECK(olmo.fused.bytes_per_token == 4.0 * static_cast<double>(oh));
}

}  // namespace
}  // namespace zplan::models
