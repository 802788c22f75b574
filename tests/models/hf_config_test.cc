// Hugging Face config.json files of each supported family: well-known parameter counts, the
// transformers defaults, and every kind of bad input.
#include <string>

#include <catch2/catch.hpp>

#include "models/catalog.h"
#include "base/json_reader.h"
#include "models/model.h"
#include "tests/models/test_util.h"

namespace zplan::models {
namespace {

using testing::data_path;
using testing::example_path;
using testing::input_error_of;

Model from_text(const std::string& text) {
  return model_from_hf_config(parse_json_text(text, "config.json"), "config.json");
}

std::string error_of(const std::string& text) {
  return input_error_of([&] { from_text(text); });
}

const char* kLlama = R"({"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
  "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000)";

std::string llama_with(const std::string& extra) {
  return std::string(kLlama) + (extra.empty() ? "" : ", " + extra) + "}";
}

TEST_CASE("Llama-family configs: well-known counts", "[models]") {
  // Llama-2-7b (directory/config.json): 32*(2*4096^2 + 2*4096^2 + 3*4096*11008 + 2*4096)
  // + 2*32000*4096 + 4096.
  Model l2 = load_model(data_path("Llama-2-7b-hf/config.json"));
  CHECK(l2.num_params() == 6'738'415'616);
  CHECK(l2.name() == "Llama-2-7b-hf");
  CHECK(l2.shape().family == Family::kLlama);
  CHECK(l2.shape().default_seq_len == 4096);

  // Meta-Llama-3-8B: 32*(2*4096^2 + 2*4096*1024 + 3*4096*14336 + 8192) + 2*128256*4096 + 4096.
  Model l3 = load_model(example_path("Meta-Llama-3-8B.json"));
  CHECK(l3.num_params() == 8'030'261'248);
  CHECK(l3.name() == "Meta-Llama-3-8B");
  CHECK(l3.shape().kv_heads == 8);
  CHECK(l3.shape().default_seq_len == 8192);
  CHECK(l3.num_params() == load_model("llama3-8b").num_params());

  // Mistral-7B-v0.1: like Llama-3-8B with V = 32000:
  // 32*(2*4096^2 + 2*4096*1024 + 3*4096*14336 + 8192) + 2*32000*4096 + 4096.
  Model mistral = load_model(example_path("Mistral-7B-v0.1.json"));
  CHECK(mistral.num_params() == 7'241'732'096);
  CHECK(mistral.shape().default_seq_len == 8192);  // 32768 capped for planning

  // Qwen2-7B: q/k/v biases (h + 2*g*d per block), untied, d = 3584/28 = 128, g*d = 512:
  // 28*(2*3584^2 + 2*3584*512 + 3*3584*18944 + 2*3584 + 3584 + 2*512) + 2*152064*3584 + 3584.
  Model qwen7 = load_model(data_path("Qwen2-7B.json"));
  CHECK(qwen7.num_params() == 7'615'616'512);
  CHECK(qwen7.num_params() == 28 * (2 * 3584LL * 3584 + 2 * 3584 * 512 + 3 * 3584LL * 18944 +
                                    2 * 3584 + 3584 + 2 * 512) +
                                  2 * 152064LL * 3584 + 3584);
  CHECK(qwen7.shape().qkv_bias);

  // Qwen2-0.5B, tied: 24*(2*896^2 + 2*896*128 + 3*896*4864 + 2*896 + 896 + 2*128)
  // + 151936*896 + 896.
  Model qwen05 = load_model(data_path("Qwen2-0.5B.json"));
  CHECK(qwen05.num_params() == 494'032'768);
  CHECK(qwen05.shape().tied_embeddings);
  CHECK(qwen05.layers().back().modules[0].tied_to == "embed_tokens");
  // 12 tensors per block (9 + 3 biases), embed_tokens, norm; the tied head adds none.
  CHECK(qwen05.num_param_tensors() == 12 * 24 + 2);

  // Llama-3.2-1B: tied, explicit head_dim 64:
  // 16*(2*2048^2 + 2*2048*512 + 3*2048*8192 + 2*2048) + 128256*2048 + 2048.
  Model l32 = load_model(data_path("Llama-3.2-1B.json"));
  CHECK(l32.num_params() == 1'235'814'400);
  CHECK(l32.shape().head_dim == 64);
}

TEST_CASE("GPT-2, OPT and GPT-NeoX configs: well-known counts", "[models]") {
  // gpt2: 12*(12*768^2 + 13*768) + 50257*768 + 1024*768 + 2*768.
  Model gpt2 = load_model(example_path("gpt2.json"));
  CHECK(gpt2.num_params() == 124'439'808);
  CHECK(gpt2.shape().family == Family::kGpt);
  CHECK(gpt2.shape().ffn == 4 * 768);
  CHECK(gpt2.shape().tied_embeddings);
  CHECK(gpt2.shape().dropout);
  CHECK(gpt2.shape().default_seq_len == 1024);

  // opt-1.3b: 24*(12*2048^2 + 13*2048) + 50272*2048 + 2050*2048 + 2*2048 (2 extra positions).
  Model opt13 = load_model(data_path("opt-1.3b.json"));
  CHECK(opt13.num_params() == 1'315'758'080);
  CHECK(opt13.name() == "opt-1.3b");  // from _name_or_path
  CHECK(opt13.shape().max_positions == 2050);
  CHECK(learned_position_limit(opt13.shape()) == 2048);  // OPT offsets positions by 2
  CHECK(learned_position_limit(gpt2.shape()) == 1024);
  CHECK(opt13.shape().activation == Activation::kRelu);
  CHECK_FALSE(opt13.shape().attention_dropout);

  // opt-350m: 512-wide token embeddings with project_in/out (no bias), post-norm, no final
  // norm: 24*(12*1024^2 + 13*1024) + 50272*512 + 2050*1024 + 2*512*1024.
  Model opt350 = load_model(data_path("opt-350m.json"));
  CHECK(opt350.num_params() == 331'196'416);
  CHECK_FALSE(opt350.shape().pre_norm);
  CHECK_FALSE(opt350.shape().final_norm);
  REQUIRE(opt350.layers().size() == 24 + 2);  // embedding, blocks, LM head
  const Layer& emb = opt350.layers().front();
  REQUIRE(emb.modules.size() == 3);
  CHECK(emb.modules[0].name == "embed_tokens");
  CHECK(emb.modules[0].numel() == 50272 * 512);
  CHECK(emb.modules[1].name == "embed_positions");
  CHECK(emb.modules[2].name == "project_in");
  CHECK(emb.modules[2].params.size() == 1);
  const Layer& head = opt350.layers().back();
  CHECK(head.kind == LayerKind::kLmHead);
  REQUIRE(head.modules.size() == 2);
  CHECK(head.modules[0].name == "project_out");
  CHECK(head.modules[1].tied_to == "embed_tokens");
  CHECK(head.modules[1].numel() == 50272 * 512);
  // Post-norm block: the attention norm comes after the projections.
  CHECK(opt350.layers()[1].modules[0].name == "layers.0.self_attn.q_proj");
  CHECK(opt350.layers()[1].modules.back().name == "layers.0.final_layer_norm");

  // gpt-neox-20b: 44*(12*6144^2 + 13*6144) + 2*50432*6144 + 2*6144.
  Model neox = load_model(data_path("gpt-neox-20b.json"));
  CHECK(neox.num_params() == 20'554'567'680);
  CHECK(neox.num_params() == load_model("20b").num_params());
  CHECK(neox.shape().parallel_residual);
  CHECK_FALSE(neox.shape().dropout);
}

TEST_CASE("transformers defaults for absent keys", "[models]") {
  // llama: num_key_value_heads absent -> heads; untied; no biases.
  Model llama = from_text(llama_with(""));
  CHECK(llama.shape().kv_heads == 4);
  CHECK_FALSE(llama.shape().tied_embeddings);
  const int64_t base = llama.num_params();
  // Per block 2*256^2 + 2*256*256 + 3*256*512 + 512; embed + head 2*1000*256; norm 256.
  CHECK(base == 2 * (4 * 256 * 256 + 3 * 256 * 512 + 512) + 2 * 1000 * 256 + 256);
  CHECK(from_text(llama_with("\"num_key_value_heads\": null")).shape().kv_heads == 4);
  CHECK(from_text(llama_with("\"tie_word_embeddings\": true")).num_params() ==
        base - 1000 * 256);
  // attention_bias: q, k, v, o biases (4 * 256 per block); mlp_bias: 2*512 + 256 per block.
  CHECK(from_text(llama_with("\"attention_bias\": true")).num_params() == base + 2 * 4 * 256);
  CHECK(from_text(llama_with("\"mlp_bias\": true")).num_params() == base + 2 * (2 * 512 + 256));
  // attention_dropout > 0 stores the attention-probability mask (without flash attention).
  CHECK(from_text(llama_with("\"attention_dropout\": 0.1")).shape().dropout);
  CHECK(llama.shape().default_seq_len == 2048);  // LlamaConfig max_position_embeddings

  // mistral: num_key_value_heads defaults to 8 (needs heads divisible by 8).
  std::string mistral = R"({"model_type": "mistral", "hidden_size": 512,
    "num_hidden_layers": 1, "num_attention_heads": 16, "intermediate_size": 512,
    "vocab_size": 100})";
  CHECK(from_text(mistral).shape().kv_heads == 8);
  // qwen2: 32 by default; q/k/v biases always.
  std::string qwen = R"({"model_type": "qwen2", "hidden_size": 2048, "num_hidden_layers": 1,
    "num_attention_heads": 32, "intermediate_size": 512, "vocab_size": 100})";
  CHECK(from_text(qwen).shape().kv_heads == 32);
  CHECK(from_text(qwen).shape().qkv_bias);

  // gpt2: n_inner null -> 4h, explicit n_inner used; n_positions default 1024; tied default.
  std::string gpt2 = R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 1, "n_head": 4,
    "vocab_size": 100, "n_inner": null})";
  Model g = from_text(gpt2);
  CHECK(g.shape().ffn == 256);
  CHECK(g.shape().max_positions == 1024);
  CHECK(g.shape().tied_embeddings);
  std::string gpt2_inner = R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 1, "n_head": 4,
    "vocab_size": 100, "n_inner": 100, "tie_word_embeddings": false})";
  Model gi = from_text(gpt2_inner);
  CHECK(gi.shape().ffn == 100);
  // activation_function: GPT-2's default gelu_new is transformers' Python formula, an eager chain
  // of 8 kernels; "gelu" (F.gelu) and "gelu_pytorch_tanh" one.
  auto gelu = [&](const std::string& act) {
    std::string text = R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 1, "n_head": 4,
      "vocab_size": 100)" + (act.empty() ? std::string() : ", \"activation_function\": \"" + act + "\"") + "}";
    const Model m = from_text(text);
    for (const ComputeOp& op : m.layers()[1].ops) {
      if (op.name == "gelu") return op.kernels;
    }
    return 0;
  };
  CHECK(g.shape().gelu_formula);
  CHECK(gelu("") == 8);
  CHECK(gelu("gelu_new") == 8);
  CHECK(gelu("gelu_fast") == 8);
  CHECK(gelu("gelu") == 1);
  CHECK(gelu("gelu_pytorch_tanh") == 1);
  // 12h^2+13h with the MLP resized: 4*64^2+4*64 (attention) + 2*64*100+100+64 (MLP) + 4*64
  // (norms); wte, wpe 1024*64, ln_f, and an untied head.
  CHECK(gi.num_params() == (4 * 64 * 64 + 4 * 64) + (2 * 64 * 100 + 100 + 64) + 4 * 64 +
                               100 * 64 + 1024 * 64 + 2 * 64 + 100 * 64);

  // gpt_neox: attention_bias false drops the q/k/v and dense biases (4h per block) only.
  std::string neox = R"({"model_type": "gpt_neox", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 256, "vocab_size": 100)";
  int64_t with_bias = from_text(neox + "}").num_params();
  CHECK(from_text(neox + ", \"attention_bias\": false}").num_params() == with_bias - 2 * 4 * 64);
  CHECK_FALSE(from_text(neox + ", \"use_parallel_residual\": false}").shape().parallel_residual);

  // opt: enable_bias false drops every linear bias (3h + h + f + h per block).
  std::string opt = R"({"model_type": "opt", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "ffn_dim": 256, "vocab_size": 100)";
  Model o = from_text(opt + "}");
  CHECK(o.shape().max_positions == 2050);
  CHECK(o.shape().final_norm);
  CHECK(from_text(opt + ", \"enable_bias\": false}").num_params() ==
        o.num_params() - 2 * (4 * 64 + 256 + 64));
  CHECK_FALSE(from_text(opt + ", \"_remove_final_layer_norm\": true}").shape().final_norm);
}

TEST_CASE("bad Hugging Face configs name the file and the key", "[models]") {
  CHECK(error_of(R"({"model_type": "bert", "hidden_size": 8})") ==
        "config.json: /model_type: unsupported model_type \"bert\"; supported: llama, mistral, "
        "qwen2, qwen3, gemma, gemma2, gemma3_text, phi3, olmo2, olmo3, granite, smollm3, ernie4_5, "
        "seed_oss, glm4, exaone4, mixtral, qwen2_moe, qwen3_moe, olmoe, glm4_moe, llama4_text, "
        "deepseek_v2, deepseek_v3, gpt_oss, gptj, falcon, gpt_neox, gpt2, opt, qwen");
  // A vision-language checkpoint: the tower is not modelled; the hint names the language
  // model's own type where text_config gives one zplan reads, or the text family a Qwen-VL
  // decoder is.
  CHECK(error_of(R"({"model_type": "qwen2_5_vl", "vision_config": {"depth": 32},
    "text_config": {"model_type": "qwen2_5_vl_text"}})") ==
        "config.json: /vision_config: not modelled: the vision tower of a qwen2_5_vl "
        "checkpoint (zplan plans language models); to plan its language model alone, save "
        "its language model's keys (text_config, or the top level of an older config) as a "
        "config.json of their own with model_type qwen2");
  CHECK(error_of(R"({"model_type": "llava", "vision_config": {},
    "text_config": {"model_type": "vicuna"}})") ==
        "config.json: /vision_config: not modelled: the vision tower of a llava "
        "checkpoint (zplan plans language models); to plan its language model alone, save "
        "the language model's keys as a config.json of their own with a model_type zplan "
        "reads");
  CHECK(error_of(R"({"model_type": "mistral3", "vision_config": {},
    "text_config": {"model_type": "mistral", "hidden_size": 5120}})") ==
        "config.json: /vision_config: not modelled: the vision tower of a mistral3 checkpoint "
        "(zplan plans language models); to plan its language model alone, save text_config "
        "(model_type mistral) as a config.json of its own");
  CHECK(error_of(R"({"hidden_size": 8})") ==
        "config.json: /model_type: missing (expected a string)");
  CHECK(error_of(R"({"model_type": 7})") ==
        "config.json: /model_type: must be a string, got 7");
  CHECK(error_of("[1]") == "config.json: must be a JSON object, got an array");
  CHECK(error_of(R"({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 512, "vocab_size": 1000})") ==
        "config.json: /hidden_size: missing (expected an integer)");
  CHECK(error_of(llama_with("\"hidden_size\": \"big\"")).find("/hidden_size") !=
        std::string::npos);
  CHECK(error_of(R"({"model_type": "llama", "hidden_size": -256, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000})") ==
        "config.json: /hidden_size: must be a positive integer, got -256");
  CHECK(error_of(R"({"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
    "num_attention_heads": 3, "intermediate_size": 512, "vocab_size": 1000})") ==
        "config.json: /head_dim: absent or null, and num_attention_heads (3) does not divide "
        "hidden_size (256): give head_dim, the width of one attention head");
  CHECK(error_of(llama_with("\"num_key_value_heads\": 3")) ==
        "config.json: /num_key_value_heads: must divide num_attention_heads (4), got 3");
  CHECK(error_of(R"({"model_type": "qwen2", "hidden_size": 256, "num_hidden_layers": 1,
    "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 100})") ==
        "config.json: /num_attention_heads: num_key_value_heads is absent and defaults to 32 "
        "for qwen2, which does not divide 4");
  CHECK(error_of(llama_with("\"tie_word_embeddings\": \"yes\"")) ==
        "config.json: /tie_word_embeddings: must be true or false, got \"yes\"");
  CHECK(error_of(llama_with("\"attention_dropout\": 1.5")) ==
        "config.json: /attention_dropout: must be a probability in [0, 1), got 1.5");
  CHECK(error_of(llama_with("\"vocab_size\": 1000000000000"))
            .find("/vocab_size: must be at most") != std::string::npos);
  CHECK(error_of(llama_with("\"vocab_size\": 1e12")).find("/vocab_size: must be an integer") !=
        std::string::npos);
  CHECK(error_of(R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 1, "n_head": 5,
    "vocab_size": 100})") == "config.json: /n_head: must divide n_embd (64), got 5");
  CHECK(error_of(R"({"model_type": "opt", "hidden_size": 64, "num_hidden_layers": 1,
    "num_attention_heads": 4, "ffn_dim": 256, "vocab_size": 100,
    "layer_norm_elementwise_affine": false})") ==
        "config.json: /layer_norm_elementwise_affine: false (layer norms without parameters) "
        "is not supported");
  CHECK(error_of(R"({"model_type": "opt", "hidden_size": 64, "num_hidden_layers": 1,
    "num_attention_heads": 4, "vocab_size": 100})") ==
        "config.json: /ffn_dim: missing (expected an integer)");
  // Issue 16 defect 14: GPT2Block builds crossattention and ln_cross_attn when
  // add_cross_attention is set (modeling_gpt2.py); false is the decoder-only GPT-2.
  const std::string gpt2 = R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 1, "n_head": 4,
    "vocab_size": 100, "add_cross_attention": )";
  CHECK(error_of(gpt2 + "true}") ==
        "config.json: /add_cross_attention: not modelled: GPT-2 cross-attention (every block gets "
        "crossattention and ln_cross_attn, for an encoder-decoder); false plans the decoder-only "
        "GPT-2");
  const std::string plain = R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 1, "n_head": 4,
    "vocab_size": 100})";
  CHECK(from_text(gpt2 + "false}").num_params() == from_text(plain).num_params());
}

TEST_CASE("Qwen v1: both spellings of QWenConfig, its split, its biases and use_flash_attn",
          "[models]") {
  const std::string sized = R"("model_type": "qwen", "vocab_size": 1000, "kv_channels": 16)";
  const Model now = from_text("{" + sized + R"(, "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 352})");
  // The first release's names (attribute_map: n_embd, n_layer, n_head; ffn_hidden_size).
  const Model first = from_text("{" + sized + R"(, "n_embd": 64, "n_layer": 2, "n_head": 4,
    "ffn_hidden_size": 352})");
  CHECK(first.num_params() == now.num_params());
  // Per block: c_attn 64 x 192 + 192 (its bias is unconditional), c_proj 64 x 64, w1, w2 and
  // c_proj of the 176-wide MLP (half of intermediate_size), two RMSNorms; untied.
  const int64_t h = 64, f = 176, v = 1000;
  const int64_t block = h * 3 * h + 3 * h + h * h + 3 * h * f + 2 * h;
  CHECK(now.num_params() == 2 * block + 2 * v * h + h);
  CHECK(now.shape().ffn == f);
  // no_bias false: c_proj and the three MLP linears get biases too.
  const Model biased = from_text("{" + sized + R"(, "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 352, "no_bias": false})");
  CHECK(biased.num_params() == now.num_params() + 2 * (h + 2 * f + h));
  CHECK_FALSE(now.shape().flash_attn_off);
  CHECK_FALSE(now.shape().eager_softmax_upcast());
  CHECK(from_text("{" + sized + R"(, "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 352, "softmax_in_fp32": true})")
            .shape()
            .eager_softmax_upcast());
  CHECK(from_text("{" + sized + R"(, "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 352, "use_flash_attn": false})")
            .shape()
            .flash_attn_off);
  CHECK(error_of("{" + sized + R"(, "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 352, "use_flash_attn": "yes"})") ==
        "config.json: /use_flash_attn: must be true, false or \"auto\", got \"yes\"");
  // Qwen-VL: the same decoder behind a ViT that the config's `visual` sizes.
  CHECK(error_of("{" + sized + R"(, "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 352, "visual": {"layers": 48}})") ==
        "config.json: /visual: not modelled: the vision tower of a Qwen-VL checkpoint "
        "(QWenModel's transformer.visual; zplan plans language models); to plan its language "
        "model alone, save the config without the visual key");
  // A float where a size belongs fails range() or nn.Linear in the modeling code.
  CHECK(error_of("{" + sized + R"(, "hidden_size": 64, "num_hidden_layers": 2.0,
    "num_attention_heads": 4, "intermediate_size": 352})") ==
        "config.json: /num_hidden_layers: must be an integer, got 2.0 (transformers builds "
        "range() and nn.Linear from it, which refuse a float)");
  // kv_channels x heads must be the hidden size (QWenAttention splits c_attn at hidden_size).
  CHECK(error_of(R"({"model_type": "qwen", "vocab_size": 1000, "hidden_size": 64,
    "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 352})") ==
        "config.json: /kv_channels: kv_channels (128) x num_attention_heads (4) must equal "
        "hidden_size (64): QWenAttention splits c_attn's output at hidden_size");
  CHECK(error_of("{" + sized + R"(, "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4})") ==
        "config.json: /intermediate_size: missing (expected an integer)");
}

TEST_CASE("Liger-Kernel patches the model types its MODEL_TYPE_TO_APPLY_LIGER_FN lists", "[models]") {
  // liger_kernel/transformers/monkey_patch.py: what use_liger_kernel looks the model_type up in.
  for (const char* file : {"Llama-3.2-1B.json", "Qwen2-7B.json", "Qwen3-8B.json",
                           "Qwen3-30B-A3B.json", "gemma-2-9b.json", "OLMo-2-1124-7B.json",
                           "Olmo-3-1025-7B.json", "Phi-3-mini-4k-instruct.json",
                           "GLM-4-9B-0414.json", "granite-3.1-8b-instruct.json", "SmolLM3-3B.json",
                           "EXAONE-4.0-32B.json", "gpt-oss-20b.json"}) {
    INFO(file);
    CHECK(load_model(data_path(file)).shape().liger);
  }
  // Not patched: Qwen v1's remote code, Qwen1.5-MoE, DeepSeek-V2/V3, GLM-4.5, OLMoE, ERNIE,
  // Seed-OSS, GPT-2-style, GPT-J, GPT-NeoX, OPT.
  for (const char* file : {"Qwen-7B.json", "Qwen1.5-MoE-A2.7B.json", "DeepSeek-V2-Lite.json",
                           "DeepSeek-R1.json", "GLM-4.5-Air.json", "OLMoE-1B-7B-0924.json",
                           "ERNIE-4.5-0.3B-PT.json", "Seed-OSS-36B-Instruct.json",
                           "gpt-j-6b.json", "gpt-neox-20b.json", "opt-1.3b.json"}) {
    INFO(file);
    CHECK_FALSE(load_model(data_path(file)).shape().liger);
  }
  CHECK(load_model("llama3-8b").shape().liger);
  CHECK_FALSE(load_model("20b").shape().liger);
}

TEST_CASE("a quantized checkpoint's quant_method is kept for the plan to name", "[models]") {
  CHECK(load_model(data_path("gpt-oss-20b.json")).shape().quant_method == "mxfp4");
  CHECK(load_model(data_path("DeepSeek-R1.json")).shape().quant_method == "fp8");
  CHECK(load_model(data_path("Llama-3.2-1B.json")).shape().quant_method.empty());
}

TEST_CASE("Gemma-2's soft-capping: Gemma2Config's defaults, null turns one off", "[models]") {
  // Gemma2Config: attn_logit_softcapping 50.0, final_logit_softcapping 30.0.
  const std::string base = R"({"model_type": "gemma2", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
    "vocab_size": 100)";
  Model m = from_text(base + "}");
  CHECK(m.shape().attn_logit_softcapping == 50.0);
  CHECK(m.shape().final_logit_softcapping == 30.0);
  m = from_text(base + R"(, "attn_logit_softcapping": null, "final_logit_softcapping": 20.0})");
  CHECK(m.shape().attn_logit_softcapping == 0);
  CHECK(m.shape().final_logit_softcapping == 20.0);
  CHECK(error_of(base + R"(, "final_logit_softcapping": -1})") ==
        "config.json: /final_logit_softcapping: must be a positive number, got -1");
  // Other families have none.
  CHECK(from_text(llama_with("\"attention_bias\": false")).shape().attn_logit_softcapping == 0);
}

TEST_CASE("any value in any key of a real config: a model or an InputError", "[models]") {
  const std::string files[] = {example_path("gpt2.json"), data_path("opt-350m.json"),
                               data_path("gpt-neox-20b.json"), data_path("Qwen2-0.5B.json"),
                               data_path("Llama-3.2-1B.json"), data_path("Qwen-7B.json")};
  const nlohmann::json values[] = {nullptr, -1, 0, 3, 1e30, 0.5, "x", true,
                                   nlohmann::json::array(), nlohmann::json::object()};
  int built = 0, rejected = 0;
  for (const std::string& file : files) {
    const nlohmann::json original = load_json_file(file);
    for (const auto& [key, unused] : original.items()) {
      for (const nlohmann::json& value : values) {
        nlohmann::json mutated = original;
        mutated[key] = value;
        INFO(file << ": " << key << " = " << value.dump());
        try {
          Model m = model_from_hf_config(mutated, file);
          CHECK(m.num_params() > 0);
          ++built;
        } catch (const InputError& e) {
          CHECK(std::string(e.what()).rfind(file + ": ", 0) == 0);
          ++rejected;
        }
      }
    }
  }
  CHECK(built > 0);
  CHECK(rejected > 0);
}

}  // namespace
}  // namespace zplan::models
