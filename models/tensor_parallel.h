// AutoTP training's view of a model (DeepSpeed 0.19.5, deepspeed/module_inject/auto_tp.py and
// layers.py; docs/cost_model.md "AutoTP tensor parallelism"): what one rank of a tensor-parallel
// group of tp GPUs holds and runs.
//
// Inside every transformer block the attention's q/k/v projections and the MLP's input
// projections (fc1, gate, up, fused qkv or gate_up) become LinearLayer -- split by output
// features, weight and bias 1/tp -- and the attention's output projection and the MLP's output
// projection (o_proj/out_proj/dense, down/fc2) become LinearAllreduce -- split by input
// features, weight 1/tp, bias whole. What runs between them (attention over heads/tp, rotary,
// the activation function, per-head q/k norms) does 1/tp of the work. Everything else stays
// whole on every rank: embeddings, norms, residual adds, dropout and the LM head (the heuristic
// AutoTP path slices neither the embedding nor lm_head in training: replace_module.py
// set_lm_head returns early in training mode). Activations follow Megatron-style tensor
// parallelism without sequence parallelism (Korthikanti et al. 2022 §4.2.1): the block's inner
// attention and MLP activations are 1/tp, its norm inputs, GEMM inputs and residual stream
// whole (models/activations.cc).
#ifndef ZPLAN_MODELS_TENSOR_PARALLEL_H_
#define ZPLAN_MODELS_TENSOR_PARALLEL_H_

#include <string>

#include "models/model.h"

namespace zplan::models {

// What AutoTP training of `model` over `tp` GPUs needs and zplan models, as InputError at `where`
// (the ds_config's /tensor_parallel/autotp_size, or the flag): tp must divide the heads, the
// key/value heads and the MLP width, as the head-aligned torch.chunk of each split weight needs
// (layers.py LinearLayer._tp_partition; DeepSpeed's AutoTP training tutorial: "TP size must
// divide ... the attention head count and hidden dimensions"); not modelled: models without
// attention (the MLP stacks), mixtures of experts, multi-head latent attention, q/k norms over
// whole projections (OLMo-2), and LoRA adapters. No-op for tp <= 1.
void check_tensor_parallel(const Model& model, int tp, const std::string& where);

// The model as one rank of a tensor-parallel group of `tp` holds it (Model::tensor_parallel() ==
// tp): each op's TpSplit applied to its GEMM widths, heads or bytes and to the parameters of the
// module it reads (kColumn: every parameter 1/tp; kRow: the weight, the module's first
// parameter, 1/tp). `model` itself for tp == 1.
// REQUIRES: check_tensor_parallel(model, tp, ...) passed; `model` is whole.
Model tensor_parallel_shard(const Model& model, int tp);

}  // namespace zplan::models

#endif  // ZPLAN_MODELS_TENSOR_PARALLEL_H_
