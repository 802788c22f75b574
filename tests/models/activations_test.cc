// Activation bytes per layer against closed forms (Korthikanti et al. 2022; reference §6) and the
// derivations in models/activations.cc.
#include <string>

#include <catch2/catch.hpp>

#include "models/catalog.h"
#include "models/model.h"

namespace zplan::models {
namespace {

ActivationOptions flash(bool on, int dtype_bytes = 2) {
  ActivationOptions o;
  o.flash_attention = on;
  o.dtype_bytes = dtype_bytes;
  return o;
}

TEST_CASE("GPT block: Korthikanti's s*b*h*(34 + 5*a*s/h)", "[models]") {
  Model m = load_model("1.3b");  // h 2048, a 32
  const double s = 2048, b = 1, h = 2048, a = 32;
  // Without flash attention: 2048*2048*(34 + 5*32*2048/2048) = 4,194,304 * 194 = 813,694,976.
  LayerActivations act = m.layer_activations(1, 2048, 1, flash(false));
  CHECK(act.stored_bytes == s * b * h * (34 + 5 * a * s / h));
  CHECK(act.stored_bytes == 813'694'976.0);
  // With flash attention the 5*a*s^2*b score terms become fp32 softmax statistics 4*a*s*b:
  // 34*2048*2048 + 4*32*2048 = 142,606,336 + 262,144.
  act = m.layer_activations(1, 2048, 1, flash(true));
  CHECK(act.stored_bytes == 34 * s * b * h + 4 * a * s * b);
  CHECK(act.stored_bytes == 142'868'480.0);
  // Full recompute keeps the block input, 2*s*b*h.
  CHECK(act.checkpoint_bytes == 2 * s * b * h);
  // Workspace estimate: in/out gradients 4sbh + the GeLU's two gradients 2*2*s*b*4h
  // (> flash's fp32 dQ, 4*s*b*h): 20*s*b*h.
  CHECK(act.workspace_bytes == 20 * s * b * h);
  // Without flash the score gradients 2*2*a*s^2*b dominate: 4sbh + 4*32*2048^2.
  act = m.layer_activations(1, 2048, 1, flash(false));
  CHECK(act.workspace_bytes == 4 * s * b * h + 4 * a * s * s * b);
}

TEST_CASE("GPT block scales with micro-batch and dtype", "[models]") {
  Model m = load_model("125m");  // h 768, a 12
  const double s = 1024, b = 4, h = 768, a = 12;
  LayerActivations act = m.layer_activations(3, 1024, 4, flash(false));
  CHECK(act.stored_bytes == s * b * h * (34 + 5 * a * s / h));
  // fp32: element tensors double (16h -> 64 bytes per h), masks stay 1 byte (2h), and the
  // scores: softmax output 4 + mask 1 + dropped output 4 = 9*a*s^2*b.
  act = m.layer_activations(3, 1024, 4, flash(false, 4));
  CHECK(act.stored_bytes == s * b * h * 66 + 9 * a * s * s * b);
  CHECK(act.checkpoint_bytes == 4 * s * b * h);
}

TEST_CASE("NeoX block: no dropout, parallel residual shares the norm input", "[models]") {
  Model m = load_model("20b");  // h 6144, a 64
  const double s = 2048, b = 1, h = 6144, a = 64;
  // Korthikanti's 34 less the two 1-byte masks (2) and one of the two norm inputs (2): 30sbh;
  // the scores keep only the softmax output 2*a*s^2*b (no dropout mask / dropped copy).
  CHECK(m.layer_activations(1, 2048, 1, flash(false)).stored_bytes ==
        30 * s * b * h + 2 * a * s * s * b);
  CHECK(m.layer_activations(1, 2048, 1, flash(true)).stored_bytes == 30 * s * b * h + 4 * a * s * b);
}

TEST_CASE("OPT block: ReLU keeps its output only, no attention dropout", "[models]") {
  ModelShape shape = load_model("1.3b").shape();
  shape.family = Family::kOpt;
  shape.activation = Activation::kRelu;
  shape.attention_dropout = false;
  Model m = build_model(shape, "opt");
  const double s = 2048, b = 1, h = 2048, a = 32;
  // 2*(2h + h + 3h + h + h + 4h) + 2h masks = 26h per token; scores: the softmax output only.
  CHECK(m.layer_activations(1, 2048, 1, flash(false)).stored_bytes ==
        26 * s * b * h + 2 * a * s * s * b);
}

TEST_CASE("Llama block counted from its own ops", "[models]") {
  const double s = 4096, b = 2;
  {
    Model m = load_model("llama2-7b");  // h 4096, a 32, g*d = h, f 11008
    const double h = 4096, a = 32, f = 11008;
    // Norm inputs 4sbh, qkv input 2sbh, Q 2sbh, K and V 2*2*sbh, o_proj input 2sbh, gate/up
    // input 2sbh, gate, up, silu(gate), product 4*2*s*b*f: 16sbh + 8sbf; flash stats 4*a*s*b;
    // and Hugging Face's LlamaRMSNorm keeps an fp32 copy of each norm's input besides its bf16
    // normalized output: 4 more bytes per element of the two norm inputs, 8sbh.
    LayerActivations act = m.layer_activations(5, 4096, 2, flash(true));
    CHECK(act.stored_bytes == 24 * s * b * h + 8 * s * b * f + 4 * a * s * b);
    // Eager (HF eager_attention_forward): the fp32 softmax output 4*a*s^2*b and its bf16 copy
    // 2*a*s^2*b (no GQA here, so no repeated K/V beyond what flash keeps).
    CHECK(m.layer_activations(5, 4096, 2, flash(false)).stored_bytes ==
          24 * s * b * h + 8 * s * b * f + 6 * a * s * s * b);
    // fp32 training: .to(query.dtype) returns the fp32 softmax output itself, one 4-byte copy;
    // every element tensor doubles; each norm keeps its fp32 input and the fp32 normalized
    // copy (.to(torch.float32) returns the input itself): 4 more bytes per norm element, 8sbh.
    CHECK(m.layer_activations(5, 4096, 2, flash(false, 4)).stored_bytes ==
          2 * (16 * s * b * h + 8 * s * b * f) + 8 * s * b * h + 4 * a * s * s * b);
    // Liger's RMSNorm keeps the bf16 input only: 8sbh less, the checkpoint unchanged.
    ActivationOptions liger_norm = flash(true);
    liger_norm.fused_rmsnorm = true;
    CHECK(m.layer_activations(5, 4096, 2, liger_norm).stored_bytes ==
          16 * s * b * h + 8 * s * b * f + 4 * a * s * b);
    CHECK(act.checkpoint_bytes == 2 * s * b * h);
    // Workspace estimate: in/out gradients 4sbh + SwiGLU's three gradients 3*2*s*b*f.
    CHECK(act.workspace_bytes == 4 * s * b * h + 6 * s * b * f);
    // Liger's SwiGLU kernel saves gate and up only (silu(gate) is recomputed; the product is
    // still down_proj's input) and writes their gradients in place: one f-wide gradient.
    ActivationOptions liger = flash(true);
    liger.fused_swiglu = true;
    LayerActivations fused = m.layer_activations(5, 4096, 2, liger);
    CHECK(act.stored_bytes - fused.stored_bytes == 2 * s * b * f);
    CHECK(fused.workspace_bytes == 4 * s * b * h + 2 * s * b * f);
    CHECK(fused.checkpoint_bytes == act.checkpoint_bytes);
    // Not a SwiGLU model, nor an RMSNorm one (LayerNorm keeps its input and per-row fp32
    // statistics): nothing changes.
    Model gpt = load_model("125m");
    liger.fused_rmsnorm = true;
    CHECK(gpt.layer_activations(1, 4096, 2, liger).stored_bytes ==
          gpt.layer_activations(1, 4096, 2, flash(true)).stored_bytes);
  }
  {
    Model m = load_model("llama3-8b");  // GQA: g*d = 1024
    const double h = 4096, gd = 1024, a = 32, f = 14336;
    // 2*s*b*(6h + 2*g*d + 4f) + 4*a*s*b, plus the norms' fp32 input copies 8sbh.
    CHECK(m.layer_activations(1, 4096, 2, flash(true)).stored_bytes ==
          2 * s * b * (6 * h + 2 * gd + 4 * f) + 8 * s * b * h + 4 * a * s * b);
    // Eager: repeat_kv copies K and V to the query width (2*2*s*b*h, not 2*2*s*b*g*d), plus
    // the fp32 and bf16 probabilities.
    CHECK(m.layer_activations(1, 4096, 2, flash(false)).stored_bytes ==
          2 * s * b * (6 * h + 2 * h + 4 * f) + 8 * s * b * h + 6 * a * s * s * b);
  }
}

TEST_CASE("attention dropout in a Llama config stores the probability mask", "[models]") {
  const char* config = R"({"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 1,
    "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 100,
    "attention_dropout": 0.1})";
  Model m = model_from_hf_config(nlohmann::json::parse(config), "config.json");
  const double s = 512, b = 2, h = 256, a = 4, f = 512;
  // 2*s*b*(6h + 2h + 4f) + the norms' fp32 input copies 8sbh + fp32 softmax output
  // 4*a*s^2*b + its bf16 copy 2*a*s^2*b + mask a*s^2*b + dropped copy 2*a*s^2*b.
  CHECK(m.layer_activations(1, 512, 2, flash(false)).stored_bytes ==
        2 * s * b * (8 * h + 4 * f) + 8 * s * b * h + 9 * a * s * s * b);
  // Flash attention regenerates the mask: statistics only.
  CHECK(m.layer_activations(1, 512, 2, flash(true)).stored_bytes ==
        2 * s * b * (8 * h + 4 * f) + 8 * s * b * h + 4 * a * s * b);
}

TEST_CASE("Gemma-2's soft-capping saves its tanh outputs (issue 16, defect 8)", "[models]") {
  // Gemma2 eager_attention_forward: scores / cap, torch.tanh, * cap; Gemma2ForCausalLM: the same
  // on the logits. tanh's backward reads its output, so each saves one D-byte tensor: a*s^2*b per
  // block under eager attention, T*V in the LM head (transformers models/gemma2/modeling_gemma2.py).
  const std::string base = R"({"model_type": "gemma2", "hidden_size": 256, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512,
    "vocab_size": 1000)";
  const Model capped = model_from_hf_config(nlohmann::json::parse(base + "}"), "config.json");
  const Model plain = model_from_hf_config(
      nlohmann::json::parse(base + R"(, "attn_logit_softcapping": null,
                                      "final_logit_softcapping": null})"),
      "config.json");
  const double s = 512, b = 2, a = 4, v = 1000;
  CHECK(capped.layer_activations(1, 512, 2, flash(false)).stored_bytes -
            plain.layer_activations(1, 512, 2, flash(false)).stored_bytes ==
        2 * a * s * s * b);
  // sdpa (which drops the soft-capping) and flash-attn (which caps inside the kernel): nothing.
  CHECK(capped.layer_activations(1, 512, 2, flash(true)).stored_bytes ==
        plain.layer_activations(1, 512, 2, flash(true)).stored_bytes);
  const size_t head = capped.layers().size() - 1;
  REQUIRE(capped.layers()[head].kind == LayerKind::kLmHead);
  CHECK(capped.layer_activations(head, 512, 2, flash(true)).stored_bytes -
            plain.layer_activations(head, 512, 2, flash(true)).stored_bytes ==
        2 * s * b * v);
  // Liger's fused loss caps inside its chunks: no logits, nothing more.
  ActivationOptions fused = flash(true);
  fused.fused_loss = true;
  CHECK(capped.layer_activations(head, 512, 2, fused).stored_bytes ==
        plain.layer_activations(head, 512, 2, fused).stored_bytes);
}

TEST_CASE("embedding, final norm and LM head activations", "[models]") {
  const double s = 2048, b = 2;
  Model gpt = load_model("125m");
  const double h = 768, V = 50257;
  // Embedding: int64 token ids 8sb + the embedding-dropout mask sbh.
  LayerActivations emb = gpt.layer_activations(0, 2048, 2, flash(true));
  CHECK(emb.stored_bytes == 8 * s * b + s * b * h);
  CHECK(emb.checkpoint_bytes == emb.stored_bytes);
  CHECK(emb.workspace_bytes == 2 * s * b * h);
  // Final norm: its input.
  LayerActivations norm = gpt.layer_activations(13, 2048, 2, flash(true));
  CHECK(norm.stored_bytes == 2 * s * b * h);
  CHECK(norm.checkpoint_bytes == norm.stored_bytes);
  CHECK(norm.workspace_bytes == 4 * s * b * h);
  // LM head: its input 2sbh, fp32 log-probabilities 4sbV, int64 labels 8sb; workspace: the
  // larger of the forward's 16-bit logits + fp32 copy (6sbV) and log-softmax's backward, the
  // fp32 gradients of the log-probabilities and of the logits (8sbV); the 16-bit gradient comes
  // after the first is freed.
  LayerActivations head = gpt.layer_activations(14, 2048, 2, flash(true));
  CHECK(head.stored_bytes == 2 * s * b * h + 4 * s * b * V + 8 * s * b);
  CHECK(head.checkpoint_bytes == head.stored_bytes);
  CHECK(head.workspace_bytes == 8 * s * b * V);
  // fp32 activations: no upcast copy, 4-byte logits: 8sbV.
  head = gpt.layer_activations(14, 2048, 2, flash(true, 4));
  CHECK(head.stored_bytes == 4 * s * b * h + 4 * s * b * V + 8 * s * b);
  CHECK(head.workspace_bytes == 8 * s * b * V);
  // The loss on the 16-bit logits (2021 GPT-2): 2-byte log-probabilities stored; the logits and
  // their shifted copy, or two 16-bit gradients, beside them.
  ActivationOptions no_upcast = flash(true);
  no_upcast.loss_upcast = false;
  head = gpt.layer_activations(14, 2048, 2, no_upcast);
  CHECK(head.stored_bytes == 2 * s * b * h + 2 * s * b * V + 8 * s * b);
  CHECK(head.workspace_bytes == 4 * s * b * V);

  // Llama: no embedding dropout; the final RMSNorm keeps its bf16 input's fp32 copy too
  // (Hugging Face's LlamaRMSNorm): (2 + 4)sbh, or 2sbh under Liger's RMSNorm.
  Model llama = load_model("llama2-7b");
  CHECK(llama.layer_activations(0, 2048, 2, flash(true)).stored_bytes == 8 * s * b);
  const size_t final_norm = llama.layers().size() - 2;
  CHECK(llama.layer_activations(final_norm, 2048, 2, flash(true)).stored_bytes ==
        6 * s * b * 4096);
  ActivationOptions liger = flash(true);
  liger.fused_rmsnorm = true;
  CHECK(llama.layer_activations(final_norm, 2048, 2, liger).stored_bytes == 2 * s * b * 4096);
}

TEST_CASE("MLP layers: what the executor allocates", "[models]") {
  Model m = load_model("tiny-mlp");  // 8 x h 1024
  const double T = 32, h = 1024;
  for (size_t i = 0; i < 8; ++i) {
    INFO(i);
    LayerActivations act = m.layer_activations(i, 1, 32, flash(true, 4));
    // Linear input + ReLU output (no ReLU on the last layer), fp32.
    CHECK(act.stored_bytes == (i < 7 ? 2 : 1) * T * h * 4);
    CHECK(act.checkpoint_bytes == T * h * 4);
    CHECK(act.workspace_bytes == 2 * T * h * 4);
  }
  // 16-bit halves every term.
  CHECK(m.layer_activations(0, 1, 32, flash(true, 2)).stored_bytes == 2 * T * h * 2);
}

}  // namespace
}  // namespace zplan::models
