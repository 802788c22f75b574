// What the config.json readers share (hf_config.cc, hf_experts.cc, hf_remote_code.cc): typed
// reads of the keys that size a network, and the mixture-of-experts, latent-attention and
// remote-code readers. Not for use outside models/.
#ifndef ZPLAN_MODELS_HF_READER_H_
#define ZPLAN_MODELS_HF_READER_H_

#include <cstdint>
#include <string>

#include "base/json_reader.h"
#include "models/model.h"

namespace zplan::models::internal {

// A positive integer at most `max`.
int64_t dim(const JsonReader& r, const char* key, int64_t max);
// dim(), or `fallback` when the key is absent or null.
int64_t optional_dim(const JsonReader& r, const char* key, int64_t fallback, int64_t max);

// A key the config class stores as given, with no `if x is None` fallback, and the modeling
// code sizes layers or compares block indices with (the MoE and latent-attention sizes): null
// is refused, as transformers would fail building the model (nn.Linear(h, None), i >= None),
// rather than read as the default.
void refuse_null(const JsonReader& r, const char* key, int64_t fallback);
// optional_dim() and a non-negative count, each with refuse_null() first.
int64_t sized_dim(const JsonReader& r, const char* key, int64_t fallback, int64_t max);
int64_t sized_count(const JsonReader& r, const char* key, int64_t fallback);

bool flag(const JsonReader& r, const char* key, bool fallback);

// A dropout probability (absent or null: `fallback`); true when it is > 0.
bool dropout_on(const JsonReader& r, const char* key, double fallback);

// The planning default for the sequence length: the model's context, capped at 8192 where
// long-context models would otherwise plan for 32K-128K tokens per sequence by default; a rotary
// model also keeps the context as ModelShape::context_length.
void set_seq_len(ModelShape& s, int64_t context);

// A key zplan does not model must not be silently ignored when it changes the network.
void refuse_if(const JsonReader& r, const char* key, bool unsupported, const std::string& why);
// A list-valued key that must be empty (or absent, or null).
void require_empty_list(const JsonReader& r, const char* key, const std::string& why);

// Qwen v1 (model_type qwen, remote code QWenLMHeadModel): hf_remote_code.cc.
ModelShape qwen_v1(const JsonReader& r);

// The experts of a mixture-of-experts model_type (hf_experts.cc has the classes and defaults).
// `transformers_major` picks the experts' layout (ModelShape::fused_experts).
void read_experts(const JsonReader& r, const std::string& type, int transformers_major,
                  ModelShape& s);
// DeepSeek-V2/V3's multi-head latent attention sizes.
void read_latent_attention(const JsonReader& r, ModelShape& s);

}  // namespace zplan::models::internal

#endif  // ZPLAN_MODELS_HF_READER_H_
