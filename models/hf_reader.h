// What the config.json readers share (hf_config.cc, hf_experts.cc): typed reads of the keys
// that size a network, and the mixture-of-experts and latent-attention readers. Not for use
// outside models/.
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

// A key zplan does not model must not be silently ignored when it changes the network.
void refuse_if(const JsonReader& r, const char* key, bool unsupported, const std::string& why);
// A list-valued key that must be empty (or absent, or null).
void require_empty_list(const JsonReader& r, const char* key, const std::string& why);

// The experts of a mixture-of-experts model_type (hf_experts.cc has the classes and defaults).
// `transformers_major` picks the experts' layout (ModelShape::fused_experts).
void read_experts(const JsonReader& r, const std::string& type, int transformers_major,
                  ModelShape& s);
// DeepSeek-V2/V3's multi-head latent attention sizes.
void read_latent_attention(const JsonReader& r, ModelShape& s);

}  // namespace zplan::models::internal

#endif  // ZPLAN_MODELS_HF_READER_H_
