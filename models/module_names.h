// The names the Hugging Face implementation of each family gives its modules, as
// model.named_modules() prints them below the base model's prefix: what ZeRO-3 gathers one by
// one, what PEFT's target_modules and DeepSpeed's leaf modules match. Not for use outside
// models/.
#ifndef ZPLAN_MODELS_MODULE_NAMES_H_
#define ZPLAN_MODELS_MODULE_NAMES_H_

#include <string>

#include "models/model.h"

namespace zplan::models::internal {

// GPT-3 shapes use GPT-2's names. Empty where the family has no such module.
struct ModuleNames {
  std::string block;  // block prefix: "h" or "layers"
  std::string norm1, norm2;
  std::string qkv;              // fused q/k/v projection; empty when q, k, v are separate
  std::string q, k, v, out;
  std::string fc1, fc2;         // two-matrix MLP
  std::string gate, up, down;   // gated MLP
  std::string gate_up;          // fused gate and up (Phi-3)
  std::string tokens, positions, final_norm, head;
};

ModuleNames module_names(const ModelShape& s);

}  // namespace zplan::models::internal

#endif  // ZPLAN_MODELS_MODULE_NAMES_H_
