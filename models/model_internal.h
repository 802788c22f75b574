// Internals shared by the files of models/: size limits, per-family defaults, the preset table.
// Not for use outside models/.
#ifndef ZPLAN_MODELS_MODEL_INTERNAL_H_
#define ZPLAN_MODELS_MODEL_INTERNAL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/model.h"

namespace zplan::models::internal {

// Upper bounds on shape fields. They are far above any real model (Llama-3.1-405B: h = 16384,
// f = 53248, V = 128256, L = 126) and keep every element count of the largest model they allow
// below 2^63, so no count can overflow int64.
inline constexpr int64_t kMaxWidth = int64_t{1} << 20;      // hidden, ffn, heads*head_dim, ...
inline constexpr int64_t kMaxVocab = int64_t{1} << 24;      // vocab and learned positions
inline constexpr int64_t kMaxLayers = int64_t{1} << 16;
inline constexpr int64_t kMaxSeqLen = int64_t{1} << 24;
// Parameters a model may have (about 500 times the largest trained): beyond it a shape is a typo.
inline constexpr double kMaxModelParams = 1e15;

// The architecture flags of a family as its reference models set them (GPT-3, OPT, GPT-NeoX,
// Llama, the executor's MLP); sizes are left 0. zplan model files start from these.
ModelShape family_defaults(Family family);

// "gpt", "opt", "neox", "llama", "mlp" (as family_name() writes them).
std::optional<Family> family_from_name(std::string_view name);

struct Preset {
  ModelShape shape;
  std::string description;  // one line: what the preset is and where its shape comes from
};

// All presets in listing order.
const std::vector<Preset>& presets();

// Case-insensitive lookup.
const Preset* find_preset(std::string_view name);

// A model name for a file: its stem ("Meta-Llama-3-8B.json" -> "Meta-Llama-3-8B"), or the name of
// its directory for a file called config.json ("Llama-2-7b-hf/config.json" -> "Llama-2-7b-hf").
std::string model_name_from_path(const std::string& path);

}  // namespace zplan::models::internal

#endif  // ZPLAN_MODELS_MODEL_INTERNAL_H_
