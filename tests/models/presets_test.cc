// Presets: exact parameter counts (reference/deepspeed_internals.md §7), the DeepSpeed estimator
// inputs (largest module, tensor count) and lookup.
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "models/catalog.h"
#include "models/model.h"

namespace zplan::models {
namespace {

// GPT-3 / OPT style, tied, learned positions (reference §7): L*(12h^2 + 13h) + V*h + P*h + 2h.
int64_t gpt_formula(int64_t L, int64_t h, int64_t V, int64_t P) {
  return L * (12 * h * h + 13 * h) + V * h + P * h + 2 * h;
}

// Llama (reference §7): L*(2h^2 + 2*h*g*d + 3*h*f + 2h) + 2*V*h + h.
int64_t llama_formula(int64_t L, int64_t h, int64_t a, int64_t g, int64_t f, int64_t V) {
  int64_t d = h / a;
  return L * (2 * h * h + 2 * h * g * d + 3 * h * f + 2 * h) + 2 * V * h + h;
}

TEST_CASE("GPT-3 presets have the reference §7 counts", "[models]") {
  struct Case {
    const char* name;
    int64_t layers, hidden, heads, params;
  };
  const Case cases[] = {
      {"125m", 12, 768, 12, 125'226'240},          {"350m", 24, 1024, 16, 355'871'744},
      {"760m", 24, 1536, 16, 760'300'032},         {"1.3b", 24, 2048, 32, 1'315'723'264},
      {"2.7b", 32, 2560, 32, 2'651'553'280},       {"6.7b", 32, 4096, 32, 6'658'404'352},
      {"13b", 40, 5120, 40, 12'853'386'240},       {"30b", 48, 7168, 56, 29'974'418'432},
      {"66b", 64, 9216, 72, 65'719'544'832},       {"175b", 96, 12288, 96, 174'604'259'328},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Model m = load_model(c.name);
    CHECK(m.name() == c.name);
    CHECK(m.shape().family == Family::kGpt);
    CHECK(m.shape().layers == c.layers);
    CHECK(m.shape().heads == c.heads);
    CHECK(m.num_params() == c.params);
    CHECK(m.num_params() == gpt_formula(c.layers, c.hidden, 50257, 2048));
    // Per block 12 tensors; wte, wpe, ln_f weight and bias; the tied head adds none.
    CHECK(m.num_param_tensors() == 12 * c.layers + 4);
    // V*h > 4h^2 + 4h for every GPT-3 size: the embedding is the largest module and tensor.
    CHECK(m.largest_module_params() == 50257 * c.hidden);
    CHECK(m.largest_param_numel() == 50257 * c.hidden);
  }
}

TEST_CASE("20b is GPT-NeoX-20B", "[models]") {
  Model m = load_model("20b");
  // 44*(12*6144^2 + 13*6144) + 2*50432*6144 + 2*6144 (reference §7).
  CHECK(m.num_params() == 20'554'567'680);
  CHECK(m.num_params() == 44 * (12 * 6144LL * 6144 + 13 * 6144) + 2 * 50432LL * 6144 + 2 * 6144);
  CHECK(m.shape().family == Family::kNeox);
  CHECK(m.shape().parallel_residual);
  CHECK_FALSE(m.shape().tied_embeddings);
  CHECK_FALSE(m.shape().dropout);
  CHECK(m.shape().max_positions == 0);
  CHECK(m.largest_module_params() == 50432 * 6144);
  // 12 per block, embed_in, final_layer_norm weight and bias, embed_out.
  CHECK(m.num_param_tensors() == 12 * 44 + 4);
}

TEST_CASE("Llama presets have the reference §7 counts", "[models]") {
  struct Case {
    const char* name;
    int64_t L, h, a, g, f, V, params;
  };
  const Case cases[] = {
      {"llama2-7b", 32, 4096, 32, 32, 11008, 32000, 6'738'415'616},
      {"llama2-13b", 40, 5120, 40, 40, 13824, 32000, 13'015'864'320},
      {"llama2-70b", 80, 8192, 64, 8, 28672, 32000, 68'976'648'192},
      {"llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8'030'261'248},
      {"llama3-70b", 80, 8192, 64, 8, 28672, 128256, 70'553'706'496},
      {"llama3.1-405b", 126, 16384, 128, 8, 53248, 128256, 405'853'388'800},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Model m = load_model(c.name);
    CHECK(m.shape().family == Family::kLlama);
    CHECK(m.shape().kv_heads == c.g);
    CHECK(m.shape().head_dim == c.h / c.a);
    CHECK(m.num_params() == c.params);
    CHECK(m.num_params() == llama_formula(c.L, c.h, c.a, c.g, c.f, c.V));
    // 9 per block; embed_tokens, norm, lm_head.
    CHECK(m.num_param_tensors() == 9 * c.L + 3);
    // Reference §7: the largest module is the embedding / LM head, V*h.
    CHECK(m.largest_module_params() == c.V * c.h);
  }
  // Reference §3.3 quotes Llama-3-8B's largest module: 128256*4096.
  CHECK(load_model("llama3-8b").largest_module_params() == 525'336'576);
}

TEST_CASE("tiny presets for the reference executor", "[models]") {
  // MLP stacks: L*(h^2 + h).
  CHECK(load_model("tiny-mlp-s").num_params() == 4 * (256 * 256 + 256));   // 263,168
  CHECK(load_model("tiny-mlp").num_params() == 8 * (1024 * 1024 + 1024));  // 8,396,800
  CHECK(load_model("tiny-mlp-l").num_params() == 16 * (2048LL * 2048 + 2048));  // 67,141,632
  Model mlp = load_model("tiny-mlp");
  CHECK(mlp.shape().family == Family::kMlp);
  CHECK(mlp.shape().default_seq_len == 1);
  CHECK(mlp.layers().size() == 8);
  CHECK(mlp.num_param_tensors() == 16);
  CHECK(mlp.largest_module_params() == 1024 * 1024 + 1024);
  CHECK(mlp.largest_param_numel() == 1024 * 1024);

  // tiny-gpt: 2*(12*256^2 + 13*256) + 4096*256 + 256*256 + 2*256 = 2,694,144.
  Model gpt = load_model("tiny-gpt");
  CHECK(gpt.num_params() == gpt_formula(2, 256, 4096, 256));
  CHECK(gpt.num_params() == 2'694'144);
  CHECK(gpt.shape().default_seq_len == 256);

  // tiny-llama: 2*(2*256^2 + 2*256*2*64 + 3*256*688 + 2*256) + 2*4096*256 + 256 = 3,548,416.
  Model llama = load_model("tiny-llama");
  CHECK(llama.num_params() == llama_formula(2, 256, 4, 2, 688, 4096));
  CHECK(llama.num_params() == 3'548'416);
  CHECK(llama.shape().kv_heads == 2);
}

TEST_CASE("preset names: listed once each, loadable, case-insensitive", "[models]") {
  std::vector<std::string> names = preset_names();
  REQUIRE(names.size() == 22);
  CHECK(names.front() == "125m");
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
  for (const std::string& name : names) {
    INFO(name);
    CHECK(load_model(name).name() == name);
    CHECK_FALSE(preset_description(name).empty());
  }
  CHECK(load_model("LLAMA3-8B").name() == "llama3-8b");
  CHECK(load_model("Tiny-MLP").name() == "tiny-mlp");
  CHECK(load_model("1.3B").num_params() == 1'315'723'264);
  CHECK(preset_description("LLaMA2-7b") == preset_description("llama2-7b"));
  CHECK(preset_description("gpt-5").empty());
}

}  // namespace
}  // namespace zplan::models
