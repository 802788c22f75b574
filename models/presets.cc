// The built-in models. Shapes and their parameter counts: reference/deepspeed_internals.md §7
// (GPT-3 sizes from metaseq's MODEL_SIZES, GPT-NeoX-20B from EleutherAI's configs/20B.yml and
// its Hugging Face config, Llama from the Hugging Face config.json files litgpt cites).
#include <string>
#include <utility>

#include "base/input_error.h"
#include "models/model_internal.h"

namespace zplan::models::internal {

ModelShape family_defaults(Family family) {
  ModelShape s;
  s.family = family;
  switch (family) {
    case Family::kGpt:
      s.norm = Norm::kLayerNorm;
      s.activation = Activation::kGelu;
      s.tied_embeddings = true;
      s.linear_bias = true;
      s.dropout = true;
      s.attention_dropout = true;
      s.default_seq_len = 2048;
      break;
    case Family::kOpt:
      s.norm = Norm::kLayerNorm;
      s.activation = Activation::kRelu;
      s.tied_embeddings = true;
      s.linear_bias = true;
      s.dropout = true;              // OPT configs: dropout 0.1 ...
      s.attention_dropout = false;   // ... attention_dropout 0.0
      s.default_seq_len = 2048;
      break;
    case Family::kNeox:
      s.norm = Norm::kLayerNorm;
      s.activation = Activation::kGelu;
      s.tied_embeddings = false;
      s.linear_bias = true;
      s.dropout = false;
      s.parallel_residual = true;
      s.default_seq_len = 2048;
      break;
    case Family::kLlama:
      s.norm = Norm::kRmsNorm;
      s.activation = Activation::kSwiglu;
      s.liger = true;  // the llama presets; a config's model_type decides (hf_config.cc)
      s.tied_embeddings = false;
      s.dropout = false;
      s.default_seq_len = 4096;
      break;
    case Family::kGptj:  // GPTJConfig: n_inner 4h, gelu_new, one ln_1, rotary, untied
      s.norm = Norm::kLayerNorm;
      s.activation = Activation::kGelu;
      s.tied_embeddings = false;
      s.mlp_bias = true;
      s.lm_head_bias = true;
      s.dropout = false;
      s.parallel_residual = true;
      s.parallel_norms = 1;
      s.default_seq_len = 2048;
      break;
    case Family::kFalcon:  // FalconConfig: parallel_attn, bias false, tied, 4h GeLU MLP
      s.norm = Norm::kLayerNorm;
      s.activation = Activation::kGelu;
      s.tied_embeddings = true;
      s.dropout = false;
      s.parallel_residual = true;
      s.parallel_norms = 1;
      s.default_seq_len = 2048;
      break;
    case Family::kMlp:
      s.activation = Activation::kRelu;
      s.linear_bias = true;
      s.dropout = false;
      s.attention_dropout = false;
      s.default_seq_len = 1;  // a "token" is one row of the input batch
      break;
  }
  return s;
}

std::optional<Family> family_from_name(std::string_view name) {
  for (Family f : {Family::kGpt, Family::kOpt, Family::kNeox, Family::kLlama, Family::kGptj,
                   Family::kFalcon, Family::kMlp}) {
    if (name == family_name(f)) return f;
  }
  return std::nullopt;
}

namespace {

// GPT-3 shapes (metaseq opt_job_constants.py MODEL_SIZES): GPT-2 vocabulary 50257, 2048 learned
// positions, ffn 4h.
Preset gpt3(const char* name, const char* label, int64_t layers, int64_t hidden, int64_t heads) {
  ModelShape s = family_defaults(Family::kGpt);
  s.name = name;
  s.layers = layers;
  s.hidden = hidden;
  s.heads = heads;
  s.ffn = 4 * hidden;
  s.vocab = 50257;
  s.max_positions = 2048;
  return {s, std::string("GPT-3 ") + label + " shape (Brown et al. 2020, as metaseq lists it)"};
}

Preset llama(const char* name, const char* label, int64_t layers, int64_t hidden, int64_t heads,
             int64_t kv_heads, int64_t ffn, int64_t vocab, int64_t seq) {
  ModelShape s = family_defaults(Family::kLlama);
  s.name = name;
  s.layers = layers;
  s.hidden = hidden;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.ffn = ffn;
  s.vocab = vocab;
  s.default_seq_len = seq;
  return {s, std::string(label) + " (Hugging Face config.json)"};
}

Preset mlp(const char* name, int64_t layers, int64_t hidden) {
  ModelShape s = family_defaults(Family::kMlp);
  s.name = name;
  s.layers = layers;
  s.hidden = hidden;
  return {s, std::to_string(layers) + " x Linear(" + std::to_string(hidden) + ", " +
                 std::to_string(hidden) + ") + ReLU, MSE loss: the reference executor's MLP"};
}

std::vector<Preset> make_presets() {
  std::vector<Preset> p;
  p.push_back(gpt3("125m", "Small (125M)", 12, 768, 12));
  p.push_back(gpt3("350m", "Medium (350M)", 24, 1024, 16));
  p.push_back(gpt3("760m", "Large (760M)", 24, 1536, 16));
  p.push_back(gpt3("1.3b", "XL (1.3B)", 24, 2048, 32));
  p.push_back(gpt3("2.7b", "2.7B", 32, 2560, 32));
  p.push_back(gpt3("6.7b", "6.7B", 32, 4096, 32));
  p.push_back(gpt3("13b", "13B", 40, 5120, 40));
  p.push_back(gpt3("30b", "30B", 48, 7168, 56));
  p.push_back(gpt3("66b", "66B", 64, 9216, 72));
  p.push_back(gpt3("175b", "175B", 96, 12288, 96));

  // GPT-NeoX-20B: configs/20B.yml (44 x 6144, 64 heads, rotary, untied, parallel residual) and
  // the Hugging Face config (vocab padded to 50432, hidden/attention dropout 0).
  ModelShape neox = family_defaults(Family::kNeox);
  neox.name = "20b";
  neox.layers = 44;
  neox.hidden = 6144;
  neox.heads = 64;
  neox.ffn = 4 * 6144;
  neox.vocab = 50432;
  p.push_back({neox, "GPT-NeoX-20B (Black et al. 2022; EleutherAI configs/20B.yml)"});

  p.push_back(llama("llama2-7b", "Llama-2-7B", 32, 4096, 32, 32, 11008, 32000, 4096));
  p.push_back(llama("llama2-13b", "Llama-2-13B", 40, 5120, 40, 40, 13824, 32000, 4096));
  p.push_back(llama("llama2-70b", "Llama-2-70B", 80, 8192, 64, 8, 28672, 32000, 4096));
  p.push_back(llama("llama3-8b", "Meta-Llama-3-8B", 32, 4096, 32, 8, 14336, 128256, 8192));
  p.push_back(llama("llama3-70b", "Meta-Llama-3-70B", 80, 8192, 64, 8, 28672, 128256, 8192));
  // Llama-3.1 supports 128K tokens; 8192 (its pre-training length) is the planning default.
  p.push_back(
      llama("llama3.1-405b", "Llama-3.1-405B", 126, 16384, 128, 8, 53248, 128256, 8192));

  // Models small enough for the reference executor (2 CPU cores).
  p.push_back(mlp("tiny-mlp-s", 4, 256));
  p.push_back(mlp("tiny-mlp", 8, 1024));
  p.push_back(mlp("tiny-mlp-l", 16, 2048));

  ModelShape tiny_gpt = family_defaults(Family::kGpt);
  tiny_gpt.name = "tiny-gpt";
  tiny_gpt.layers = 2;
  tiny_gpt.hidden = 256;
  tiny_gpt.heads = 4;
  tiny_gpt.ffn = 1024;
  tiny_gpt.vocab = 4096;
  tiny_gpt.max_positions = 256;
  tiny_gpt.default_seq_len = 256;
  p.push_back({tiny_gpt, "2-layer GPT, h 256, vocab 4096: a transformer the executor can run"});

  ModelShape tiny_llama = family_defaults(Family::kLlama);
  tiny_llama.name = "tiny-llama";
  tiny_llama.layers = 2;
  tiny_llama.hidden = 256;
  tiny_llama.heads = 4;
  tiny_llama.kv_heads = 2;
  tiny_llama.ffn = 688;
  tiny_llama.vocab = 4096;
  tiny_llama.default_seq_len = 256;
  p.push_back({tiny_llama, "2-layer Llama (GQA 4/2), h 256, vocab 4096: for the executor"});
  return p;
}

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return ascii_lower(std::string(a)) == ascii_lower(std::string(b));
}

}  // namespace

const std::vector<Preset>& presets() {
  static const std::vector<Preset> table = make_presets();
  return table;
}

const Preset* find_preset(std::string_view name) {
  for (const Preset& p : presets()) {
    if (equal_ignoring_case(p.shape.name, name)) return &p;
  }
  return nullptr;
}

}  // namespace zplan::models::internal
