// Fine-tuning (models/finetune.h): LoRA adapter counts per family, what is frozen, which
// activations a frozen linear no longer keeps, and the flags' errors.
#include <catch2/catch.hpp>

#include "models/catalog.h"
#include "models/finetune.h"
#include "tests/models/test_util.h"

namespace zplan::models {
namespace {

using testing::data_path;
using testing::example_path;
using testing::input_error_of;

Model lora(const std::string& model, int64_t r, const std::string& targets,
           int transformers = kDefaultTransformers) {
  FineTune ft;
  ft.lora_rank = r;
  ft.lora_targets = parse_lora_targets(targets);
  return apply_finetune(load_model(model, transformers), ft);
}

Model partial(const std::string& model, double fraction) {
  FineTune ft;
  ft.trainable_fraction = fraction;
  return apply_finetune(load_model(model), ft);
}

TEST_CASE("LoRA adapters on llama3-8b: r*(in+out) per target per layer, base frozen",
          "[models]") {
  const Model base = load_model("llama3-8b");
  // q_proj: 4096 -> 4096; v_proj: 4096 -> 8 kv heads x 128 = 1024 (GQA).
  // r = 16: 16*(4096+4096) + 16*(4096+1024) = 131072 + 81920 = 212992 per layer, x 32 layers
  // = 6,815,744 -- what PEFT's print_trainable_parameters() prints for this model.
  const Model qv = lora("llama3-8b", 16, "q_proj,v_proj");
  CHECK(qv.trainable_params() == 6'815'744);
  CHECK(qv.num_params() == base.num_params() + 6'815'744);
  // all-linear adds k (81920), o (131072) and gate, up, down: 16*(4096+14336) = 294912 each:
  // 2*131072 + 2*81920 + 3*294912 = 1,310,720 per layer, x 32 = 41,943,040.
  const Model all = lora("llama3-8b", 16, "all-linear");
  CHECK(all.trainable_params() == 41'943'040);
  // The same list spelled out; rank is linear in the count.
  CHECK(lora("llama3-8b", 16, "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj")
            .trainable_params() == 41'943'040);
  CHECK(lora("llama3-8b", 8, "all-linear").trainable_params() == 41'943'040 / 2);
  // Every base GEMM is frozen, every adapter GEMM trains; the embedding has no backward.
  const Layer& block = qv.layers()[1];
  int frozen = 0, adapters = 0;
  for (const ComputeOp& op : block.ops) {
    if (op.kind != OpKind::kGemm) continue;
    (op.frozen_weight ? frozen : adapters) += 1;
  }
  CHECK(frozen == 7);
  CHECK(adapters == 4);
  CHECK(qv.layers()[0].no_grad);
  CHECK_FALSE(qv.layers()[1].no_grad);
  CHECK(qv.finetune().lora());
  CHECK(describe_finetune(qv.finetune()) == "LoRA rank 16 on q_proj,v_proj (base weights frozen)");
  // Names that select linears of other names say which (PEFT's own Falcon default is
  // query_key_value; Mixtral's gate projections are w1); the order given does not matter.
  CHECK(describe_finetune(lora(example_path("falcon-7b.json"), 16, "q_proj,v_proj").finetune()) ==
        "LoRA rank 16 on q_proj,v_proj (the linears query_key_value; base weights frozen)");
  CHECK(describe_finetune(
            lora(example_path("Mixtral-8x7B-v0.1.json"), 8, "gate_proj", 4).finetune()) ==
        "LoRA rank 8 on gate_proj (the linears w1; base weights frozen)");
  CHECK(describe_finetune(lora("llama3-8b", 16, "v_proj,q_proj").finetune()) ==
        "LoRA rank 16 on v_proj,q_proj (base weights frozen)");
}

TEST_CASE("LoRA target names on fused, MoE and latent-attention families", "[models]") {
  // GPT-2 fuses q, k, v into c_attn (768 -> 2304): q_proj and v_proj both select it, one
  // adapter: 8*(768+2304) = 24576 per layer, x 12 = 294,912 -- PEFT's count for gpt2 with its
  // default target c_attn.
  CHECK(lora(example_path("gpt2.json"), 8, "q_proj,v_proj").trainable_params() == 294'912);
  CHECK(lora(example_path("gpt2.json"), 8, "c_attn").trainable_params() == 294'912);
  // Falcon-7B: query_key_value 4544 -> 4544 + 2*64 (multi-query) = 4672:
  // 16*(4544+4672) = 147456 per layer, x 32 = 4,718,592 (PEFT's figure for falcon-7b).
  CHECK(lora(example_path("falcon-7b.json"), 16, "query_key_value").trainable_params() ==
        4'718'592);
  // Qwen-7B-Chat with Qwen's finetune.py defaults (r 64 on c_attn, c_proj, w1, w2; c_proj is
  // both attn.c_proj and mlp.c_proj): 64 * ((4096 + 12288) + (4096 + 4096) + 3 * (4096 +
  // 11008)) = 4,472,832 per block, x 32: PEFT's "trainable params: 143,130,624".
  const std::string qwen = data_path("Qwen-7B.json");
  CHECK(lora(qwen, 64, "c_attn,c_proj,w1,w2").trainable_params() == 143'130'624);
  // The generic names: w2 is QWenMLP's gate, w1 its up projection, mlp.c_proj the down.
  CHECK(describe_finetune(lora(qwen, 8, "gate_proj").finetune()) ==
        "LoRA rank 8 on gate_proj (the linears w2; base weights frozen)");
  CHECK(describe_finetune(lora(qwen, 8, "up_proj,o_proj").finetune()) ==
        "LoRA rank 8 on up_proj,o_proj (the linears attn.c_proj,w1; base weights frozen)");
  // Mixtral-8x7B under transformers 4.x: down_proj of each of the 8 experts, 14336 -> 4096:
  // 8 experts * 8*(14336+4096) = 1,179,648 per layer, x 32 = 37,748,736.
  const std::string mixtral_file = example_path("Mixtral-8x7B-v0.1.json");
  const Model mixtral = lora(mixtral_file, 8, "down_proj", 4);
  CHECK(mixtral.trainable_params() == 37'748'736);
  // The same experts by Mixtral's own names, as PEFT users target them: w2 is the down
  // projection, w1 and w3 the gate and up (each 4096 -> 14336, the same r*(in+out)).
  CHECK(lora(mixtral_file, 8, "w2", 4).trainable_params() == 37'748'736);
  CHECK(lora(mixtral_file, 8, "w1,w2,w3", 4).trainable_params() == 3 * 37'748'736);
  CHECK(lora(mixtral_file, 8, "w1,w2,w3", 4).trainable_params() ==
        lora(mixtral_file, 8, "gate_proj,up_proj,down_proj", 4).trainable_params());
  // transformers 5 keeps the experts as MixtralExperts' 3D tensors and routes with a
  // MixtralTopKRouter: neither is an nn.Linear, so PEFT's target_modules reaches neither.
  // all-linear is the attention's four linears alone: 8*(2h + 2(h+1024)) * 2 = 8 * 26624 per
  // layer, x 32 = 6,815,744.
  CHECK(lora(mixtral_file, 8, "all-linear").trainable_params() == 6'815'744);
  CHECK(lora(mixtral_file, 8, "all-linear", 4).trainable_params() ==
        6'815'744 + 3 * 37'748'736 + 32 * 8 * (4096 + 8));  // + the experts and the router
  // A token runs 2 of the 8 experts, so 2 of 8 experts' adapters are active.
  const Model all4 = lora(mixtral_file, 8, "all-linear", 4);
  CHECK(all4.active_params() - load_model(mixtral_file, 4).active_params() ==
        6'815'744 + 3 * 37'748'736 * 2 / 8 + 32 * 8 * (4096 + 8));
  // Llama 4's experts are 3D in every release: no --transformers hint.
  const std::string l4 = input_error_of(
      [] { lora(data_path("Llama-4-Scout-17B-16E-text_config.json"), 8, "gate_up_proj", 4); });
  CHECK_THAT(l4, Catch::Contains("Llama 4 keeps its routed experts as 3D tensors of "
                                 "feed_forward.experts in every transformers release"));
  CHECK_THAT(l4, !Catch::Contains("--transformers"));
  const std::string none = input_error_of([&] { lora(mixtral_file, 8, "w1"); });
  CHECK_THAT(none, Catch::Contains("'w1' matches no linear"));
  // The generic names offered are those that select a linear it has: not gate_proj here.
  CHECK_THAT(none, Catch::Contains("(its block linears: q_proj, k_proj, v_proj, o_proj; or "
                                   "all-linear; transformers 5 keeps"));
  CHECK_THAT(none, Catch::Contains("transformers 5 keeps the routed experts as 3D tensors"));
  CHECK_THAT(none, Catch::Contains("--transformers 4"));
  // gpt-oss: the router (GptOssTopKRouter) and the 3D experts are no nn.Linear in any release,
  // so all-linear is q, k, v and o: 8*(2880+4096) + 2 * 8*(2880+512) + 8*(4096+2880) per layer,
  // x 24 = 3,981,312.
  CHECK(lora(data_path("gpt-oss-20b.json"), 8, "all-linear", 4).trainable_params() ==
        3'981'312);
  CHECK(lora(data_path("gpt-oss-20b.json"), 8, "all-linear").trainable_params() == 3'981'312);
  // Qwen1.5-MoE under transformers 5: down_proj reaches the shared expert's alone (5632 ->
  // 2048), 8 * 7680 per layer, x 24 = 1,474,560.
  CHECK(lora(data_path("Qwen1.5-MoE-A2.7B.json"), 8, "down_proj").trainable_params() ==
        1'474'560);
  // DeepSeek-V2-Lite (no q_lora_rank): k_proj selects kv_a_proj_with_mqa (h -> kv_lora + rope)
  // and kv_b_proj (kv_lora -> heads*(nope + v)).
  const Model ds = load_model(data_path("DeepSeek-V2-Lite.json"));
  const ModelShape& s = ds.shape();
  const int64_t r = 4;
  const int64_t per_layer = r * (s.hidden + s.kv_lora_rank + s.qk_rope_head_dim) +
                            r * (s.kv_lora_rank + s.heads * (s.qk_nope_head_dim + s.v_head_dim));
  CHECK(lora(data_path("DeepSeek-V2-Lite.json"), r, "k_proj").trainable_params() ==
        per_layer * s.layers);
  // Phi-3's fused gate_up_proj (h -> 2f) answers to gate_proj and up_proj, once.
  const Model phi = load_model(data_path("Phi-3-mini-4k-instruct.json"));
  const ModelShape& p = phi.shape();
  CHECK(lora(data_path("Phi-3-mini-4k-instruct.json"), 8, "gate_proj,up_proj")
            .trainable_params() == 8 * (p.hidden + 2 * p.ffn) * p.layers);
}

TEST_CASE("a trainable fraction freezes whole layers from the bottom, embedding first",
          "[models]") {
  const Model base = load_model("llama3-8b");
  const Model half = partial("llama3-8b", 0.5);
  const double total = static_cast<double>(base.num_params());
  const double trainable = static_cast<double>(half.trainable_params());
  const double block = static_cast<double>(base.layers()[1].numel());
  // At least half trains, and one block fewer would be less than half.
  CHECK(trainable >= 0.5 * total);
  CHECK(trainable - block < 0.5 * total);
  CHECK(half.layers()[0].no_grad);  // the embedding is frozen first
  size_t first_trained = 0;
  while (half.layers()[first_trained].no_grad) ++first_trained;
  CHECK(half.layers()[first_trained].trainable_numel() == half.layers()[first_trained].numel());
  // No gradient reaches the frozen bottom: nothing stored there.
  ActivationOptions o;
  CHECK(half.layer_activations(1, 2048, 1, o).stored_bytes == 0);
  // GPT-2 ties the LM head to the token embedding: freezing the embedding freezes the head.
  const Model gpt = partial(example_path("gpt2.json"), 0.5);
  const Layer& head = gpt.layers().back();
  CHECK(head.ops.front().frozen_weight);
  // A fraction too large to free any layer leaves everything trainable.
  CHECK(partial("llama3-8b", 0.999).trainable_params() == base.num_params());
}

TEST_CASE("a frozen linear's input is not saved unless an adapter or another reader keeps it",
          "[models]") {
  // llama3-8b, s = 2048, b = 1, bf16, sdpa: a block keeps 2*T*(6h + 2G + 4f) + 4*a*T, plus
  // the two RMSNorms' fp32 input copies 4*T*2h (models/activations.cc). With LoRA on q and v
  // only: the MLP input (h, read by the frozen gate and up) and the down projection's input (f)
  // are no longer saved; the attention input stays (lora_A of q and v saves it); the output
  // projection's input stays (flash attention keeps it as O); each adapter adds its rank-16
  // lora_A output; and the frozen norm weights' multiply saves no normalized bf16 copy, so the
  // norms keep 4 - 2 bytes per element beyond the bf16 input counted: 2*T*2h.
  const Model base = load_model("llama3-8b");
  const Model qv = lora("llama3-8b", 16, "q_proj,v_proj");
  const double T = 2048, h = 4096, G = 1024, f = 14336, a = 32, r = 16;
  ActivationOptions o;
  CHECK(base.layer_activations(1, 2048, 1, o).stored_bytes ==
        2 * T * (6 * h + 2 * G + 4 * f) + 4 * T * 2 * h + 4 * a * T);
  CHECK(qv.layer_activations(1, 2048, 1, o).stored_bytes ==
        2 * T * (6 * h + 2 * G + 4 * f - h - f + 2 * r) + 2 * T * 2 * h + 4 * a * T);
  // lora_dropout 0.1: each adapter keeps its dropped copy of the input (bf16) and the mask (one
  // byte), and lora_A no longer reads the attention input itself, which is then not saved.
  FineTune ft;
  ft.lora_rank = 16;
  ft.lora_targets = parse_lora_targets("q_proj,v_proj");
  ft.lora_dropout = 0.1;
  const Model qv_drop = apply_finetune(base, ft);
  CHECK(qv_drop.layer_activations(1, 2048, 1, o).stored_bytes -
            qv.layer_activations(1, 2048, 1, o).stored_bytes ==
        2 * (2 + 1) * T * h - 2 * T * h);
  CHECK(qv_drop.trainable_params() == qv.trainable_params());
  // Their backward: dropout's gradient is one masked pass like its forward (5 bytes an input
  // element); the add passes its gradient through, and the scale's reads and writes out (4).
  int checked = 0;
  for (const ComputeOp& op : qv_drop.layers()[1].ops) {
    if (op.name == "layers.0.self_attn.v_proj.lora_dropout") {
      CHECK(op.backward_bytes() == 5 * h);
      ++checked;
    } else if (op.name == "layers.0.self_attn.v_proj.lora_add") {
      CHECK(op.bytes_per_token == 10 * G);
      CHECK(op.backward_bytes() == 4 * G);
      ++checked;
    } else if (op.name == "silu") {
      CHECK(op.backward_bytes() == 2 * op.bytes_per_token);  // the default
      ++checked;
    }
  }
  CHECK(checked == 3);
  CHECK(describe_finetune(qv_drop.finetune()) ==
        "LoRA rank 16 on q_proj,v_proj, dropout 0.1 (base weights frozen)");
  // Eager attention: the output projection's input (A = h) is dropped too.
  o.flash_attention = false;
  CHECK(base.layer_activations(1, 2048, 1, o).stored_bytes -
            qv.layer_activations(1, 2048, 1, o).stored_bytes ==
        2 * T * (h + f + h - 2 * r) + 2 * T * 2 * h);
  // all-linear: every input is still saved, plus seven rank-r outputs; the frozen norms keep
  // no normalized bf16 copy (2 bytes less per element of the two norm inputs).
  o.flash_attention = true;
  CHECK(lora("llama3-8b", 16, "all-linear").layer_activations(1, 2048, 1, o).stored_bytes ==
        base.layer_activations(1, 2048, 1, o).stored_bytes + 2 * T * 7 * r - 2 * T * 2 * h);
}

TEST_CASE("modules_to_save: a trainable copy of the embedding or LM head runs in its place",
          "[models]") {
  // Qwen's finetune.py on a base model: LoRA plus modules_to_save ["wte", "lm_head"] (its
  // README's "LoRA (emb)"). Each gets a trainable copy (ModulesToSaveWrapper); the original
  // stays stored and frozen, and forward reads the copy.
  FineTune ft;
  ft.lora_rank = 64;
  ft.lora_targets = parse_lora_targets("c_attn,c_proj,w1,w2");
  ft.modules_to_save = parse_modules_to_save("wte,lm_head");
  const Model base = load_model(data_path("Qwen-7B.json"));
  const Model emb = apply_finetune(base, ft);
  const int64_t vh = 151'936LL * 4096;
  CHECK(emb.trainable_params() == 143'130'624 + 2 * vh);
  CHECK(emb.num_params() == base.num_params() + 143'130'624 + 2 * vh);
  const Layer& head = emb.layers().back();
  REQUIRE(head.ops.front().name == "lm_head");
  CHECK(head.modules[head.ops.front().module].name == "lm_head.modules_to_save.default");
  CHECK_FALSE(head.ops.front().frozen_weight);
  CHECK(describe_finetune(emb.finetune()) ==
        "LoRA rank 64 on c_attn,c_proj,w1,w2 (the linears c_attn,attn.c_proj,w1,w2,mlp.c_proj; "
        "base weights frozen), wte,lm_head trained in full (modules_to_save)");
  // Without LoRA on the blocks' linears nothing below the head trains: the embedding's copy
  // makes the whole model's backward run.
  CHECK_FALSE(emb.layers().front().no_grad);
  // A tied embedding, a block's module and a name of nothing are refused by the flag.
  ft.lora_targets = parse_lora_targets("c_attn");
  CHECK_THAT(input_error_of([&] { apply_finetune(load_model(example_path("gpt2.json")), ft); }),
             Catch::StartsWith("--lora-modules-to-save: 'wte': not modelled: modules_to_save on "
                               "gpt2's tied embedding and LM head"));
  ft.modules_to_save = parse_modules_to_save("ln_f");
  CHECK(input_error_of([&] { apply_finetune(base, ft); }) ==
        "--lora-modules-to-save: 'ln_f': not modelled: modules_to_save on ln_f (zplan trains "
        "the embedding and LM head modules in full)");
  ft.modules_to_save = parse_modules_to_save("embed_tokens");
  CHECK(input_error_of([&] { apply_finetune(base, ft); }) ==
        "--lora-modules-to-save: 'embed_tokens' matches no embedding or LM head module of "
        "Qwen-7B (its modules: wte, lm_head)");
  CHECK(input_error_of([] { parse_modules_to_save("wte,,lm_head"); })
            .rfind("--lora-modules-to-save: has an empty entry", 0) == 0);
}

TEST_CASE("bad fine-tuning values: one line naming the flag", "[models]") {
  CHECK(input_error_of([] { parse_lora_targets("q_proj,,v_proj"); }).find("--lora-targets") == 0);
  CHECK(input_error_of([] { parse_lora_targets("q proj"); }).find("--lora-targets") == 0);
  CHECK(input_error_of([] { parse_lora_targets(""); }).find("--lora-targets") == 0);
  CHECK(parse_lora_targets(" q_proj , v_proj,q_proj") ==
        std::vector<std::string>{"q_proj", "v_proj"});
  CHECK(input_error_of([] { parse_lora_targets("self_attn..q_proj"); }).find("--lora-targets") ==
        0);
  CHECK(input_error_of([] { parse_lora_targets("all-linear,q_proj"); }) ==
        "--lora-targets: 'all-linear' stands alone (PEFT reads it only as the whole "
        "target_modules), got 'all-linear,q_proj'");
  // Dotted targets match the end of a module name after a dot, as PEFT's do.
  CHECK(lora("llama3-8b", 16, "self_attn.q_proj").trainable_params() ==
        lora("llama3-8b", 16, "q_proj").trainable_params());
  CHECK(lora("llama3-8b", 16, "layers.0.self_attn.q_proj").trainable_params() ==
        16 * (4096 + 4096));
  // The full name model.named_modules() prints, with the base model's prefix.
  CHECK(lora("llama3-8b", 16, "model.layers.0.self_attn.q_proj").trainable_params() ==
        16 * (4096 + 4096));
  CHECK(input_error_of([] { lora("llama3-8b", 16, "attn.q_proj"); })
            .find("'attn.q_proj' matches no linear") != std::string::npos);
  CHECK(input_error_of([] { lora("llama3-8b", 16, "q_proj,lm_head"); }) ==
        "--lora-targets: 'lm_head': not modelled: LoRA on lm_head (zplan adds adapters to the "
        "blocks' linears only)");
  const std::string unknown = input_error_of([] { lora("llama3-8b", 16, "q_proj,c_attn"); });
  CHECK(unknown.find("--lora-targets") == 0);
  CHECK(unknown.find("'c_attn' matches no linear of llama3-8b") != std::string::npos);
  CHECK(unknown.find("gate_proj") != std::string::npos);  // lists what it has
  // ... once: the Llama-style aliases are Llama's own names there.
  CHECK(unknown.find("gate_proj") == unknown.rfind("gate_proj"));
  CHECK(unknown.find("down_proj; or all-linear)") != std::string::npos);
  // GPT-2's MLP has no gate.
  CHECK(input_error_of([] { lora(example_path("gpt2.json"), 8, "gate_proj"); })
            .find("matches no linear") != std::string::npos);
  CHECK(input_error_of([] { lora("llama3-8b", 1 << 20, "q_proj"); }).find("--lora-rank") == 0);
  CHECK(input_error_of([] { partial("llama3-8b", 0); }).find("--trainable") == 0);
  CHECK(input_error_of([] { partial("llama3-8b", 1.5); }).find("--trainable") == 0);
  CHECK(input_error_of([] { partial("tiny-mlp", 0.5); }).find("--trainable") == 0);
  FineTune both;
  both.lora_rank = 8;
  both.lora_targets = {"q_proj"};
  both.trainable_fraction = 0.5;
  CHECK(input_error_of([&] { apply_finetune(load_model("llama3-8b"), both); })
            .find("--trainable") == 0);
}

}  // namespace
}  // namespace zplan::models
