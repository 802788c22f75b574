// Where models come from: built-in presets, Hugging Face config.json files, and zplan's own
// model JSON files.
#ifndef ZPLAN_MODELS_CATALOG_H_
#define ZPLAN_MODELS_CATALOG_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/model.h"

namespace zplan::models {

// Names of the built-in presets, in the order `zplan models` lists them.
std::vector<std::string> preset_names();

// One line saying what a preset is and where its shape comes from; empty for an unknown name.
std::string preset_description(const std::string& name);

// Resolves a --model value: a preset name (case-insensitive), or a path to a JSON file that is
// either a Hugging Face config.json (has "model_type") or a zplan model file (has "family"), or
// a Hugging Face model folder (its config.json). Throws InputError: an unknown name lists the
// presets; a bad file names the file and pointer.
//
// `transformers_major` is the transformers release line the training runs (5 or 4): it decides
// how a Hugging Face mixture of experts is laid out (ModelShape::fused_experts; docs/models.md
// "Mixture of experts"); in a zplan model file, fused_experts says it instead where given.
constexpr int kDefaultTransformers = 5;
Model load_model(const std::string& spec, int transformers_major = kDefaultTransformers);

// The file a --model path is read from: `spec` itself, or a folder's config.json.
std::string model_file_of(const std::string& spec);

// A Hugging Face config.json of one of hf_model_types() (docs/models.md).
// `file` names the source in error messages.
Model model_from_hf_config(const nlohmann::json& config, const std::string& file,
                           int transformers_major = kDefaultTransformers);

// The model_type values model_from_hf_config reads, in the order `zplan models` lists them.
std::vector<std::string> hf_model_types();

// zplan's model file: the fields of ModelShape by name (docs/models.md).
Model model_from_zplan_json(const nlohmann::json& spec, const std::string& file,
                            int transformers_major = kDefaultTransformers);

}  // namespace zplan::models

#endif  // ZPLAN_MODELS_CATALOG_H_
