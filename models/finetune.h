// Fine-tuning with frozen parameters: LoRA adapters (PEFT) and partial freezing.
//
// apply_finetune() turns a model into the one that is trained:
//  * LoRA (--lora-rank r, --lora-targets): every base parameter is frozen (PEFT's
//    mark_only_lora_as_trainable with bias="none"); each targeted linear of every transformer
//    block gets lora_A (r x in) and lora_B (out x r), both trainable, and two GEMMs of its forward
//    (x -> A x -> B A x, then scaled and added to the base output). lora_dropout is taken as PEFT's
//    default, 0 (nn.Identity: lora_A reads the base linear's own input). An expert projection
//    of a mixture of experts gets one adapter per expert. --lora-modules-to-save (PEFT's
//    modules_to_save): the embedding or LM head trained in full through a copy.
//  * --trainable F: whole layers are frozen from the bottom -- the embedding first, then blocks
//    0, 1, ... -- as long as the parameters left trainable stay >= F of the total; so the
//    trainable set is the smallest top slice of layers holding at least F (a tied LM head
//    shares the embedding's matrix, so it is frozen with it).
// Frozen linears keep their weights (stored, partitioned and gathered as 16-bit params) but
// skip the weight-gradient GEMM in backward; layers that nothing below or in them trains have no
// backward at all (Layer::no_grad); linear inputs that only a frozen weight's gradient needed are
// no longer saved (Layer::unsaved). docs/models.md "Fine-tuning" has the details per family.
#ifndef ZPLAN_MODELS_FINETUNE_H_
#define ZPLAN_MODELS_FINETUNE_H_

#include <string>
#include <vector>

#include "models/model.h"

namespace zplan::models {

// PEFT's default LoRA targets for LLaMA (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING in
// peft/utils/constants.py: "llama": ["q_proj", "v_proj"]).
inline const char* const kDefaultLoraTargets = "q_proj,v_proj";

// Parses --lora-targets: a comma list of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj,
// down_proj, "all-linear", or a module's own last name component (c_attn, query_key_value,
// qkv_proj, gate_up_proj, dense, fc1, kv_b_proj, ...), trimmed and de-duplicated in order.
// Throws InputError naming --lora-targets for an empty list or an empty or malformed entry.
std::vector<std::string> parse_lora_targets(const std::string& list);
// The same for --lora-modules-to-save (errors name that flag; no "all-linear").
std::vector<std::string> parse_modules_to_save(const std::string& list);

// "LoRA rank 16 on q_proj,v_proj (base weights frozen)" or "the bottom layers frozen
// (--trainable 0.25)"; "" for full fine-tuning.
std::string describe_finetune(const FineTune& finetune);

// The model with `finetune` applied (the shape and name are unchanged; finetune() returns it).
// A default FineTune returns the model as it is. Throws InputError naming the flag for a rank
// outside [1, 65536], a target no linear of the
// model answers to (listing those it has), a fraction outside (0, 1], both LoRA and a fraction,
// or a fine-tuning of the executor's MLP stacks.
Model apply_finetune(const Model& model, const FineTune& finetune);

}  // namespace zplan::models

#endif  // ZPLAN_MODELS_FINETUNE_H_
