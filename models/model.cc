#include "models/model.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace zplan::models {

const char* family_name(Family family) {
  switch (family) {
    case Family::kGpt:
      return "gpt";
    case Family::kOpt:
      return "opt";
    case Family::kNeox:
      return "neox";
    case Family::kLlama:
      return "llama";
    case Family::kGptj:
      return "gptj";
    case Family::kFalcon:
      return "falcon";
    case Family::kMlp:
      return "mlp";
  }
  return "?";
}

const char* norm_name(Norm norm) {
  switch (norm) {
    case Norm::kLayerNorm:
      return "layernorm";
    case Norm::kRmsNorm:
      return "rmsnorm";
  }
  return "?";
}

const char* activation_name(Activation activation) {
  switch (activation) {
    case Activation::kGelu:
      return "gelu";
    case Activation::kRelu:
      return "relu";
    case Activation::kSwiglu:
      return "swiglu";
  }
  return "?";
}

int64_t Module::numel() const {
  int64_t total = 0;
  for (const Param& p : params) total += p.numel;
  return total;
}

int64_t Module::trainable_numel() const {
  int64_t total = 0;
  for (const Param& p : params) total += p.trainable ? p.numel : 0;
  return total;
}

int64_t Layer::trainable_numel() const {
  int64_t total = 0;
  for (const Module& m : modules) {
    if (m.tied_to.empty()) total += m.trainable_numel();
  }
  return total;
}

int64_t Layer::numel() const {
  int64_t total = 0;
  for (const Module& m : modules) {
    if (m.tied_to.empty()) total += m.numel();
  }
  return total;
}

// The totals follow DeepSpeed's estimators (reference/deepspeed_internals.md §3.1, §3.2):
// total_params counts each tensor once (a dict keyed by data_ptr), largest_layer_params is the
// largest sum of one module's own parameters over model.modules() -- which visits a tied LM head
// too, so the shared matrix is that module's direct parameter as well.
Model::Model(ModelShape shape, std::vector<Layer> layers, int tensor_parallel,
             int64_t whole_params)
    : shape_(std::move(shape)), layers_(std::move(layers)), tensor_parallel_(tensor_parallel) {
  assert(tensor_parallel_ >= 1);
  for (const Layer& layer : layers_) {
    num_params_ += layer.numel();
    trainable_params_ += layer.trainable_numel();
    for (const Module& m : layer.modules) {
      largest_module_params_ = std::max(largest_module_params_, m.numel());
      for (const Param& p : m.params) {
        largest_param_numel_ = std::max(largest_param_numel_, p.numel);
        if (m.tied_to.empty()) ++num_param_tensors_;
      }
    }
  }
  whole_params_ = whole_params > 0 ? whole_params : num_params_;
  // A token visits experts_per_token of the routed experts of each MoE block; the others'
  // parameters (their gate/up/down matrices, GPT-OSS's biases, and under transformers 4.x the
  // LoRA adapters on them) are not active for it. The routed experts are the modules under
  // <block>.experts: one per expert and its adapters (4.x), or one of 3D tensors.
  active_params_ = num_params_;
  if (shape_.experts > 0) {
    for (const Layer& layer : layers_) {
      if (!layer.moe_block) continue;
      int64_t routed = 0;
      for (const Module& m : layer.modules) {
        if (m.name.find(".experts.") != std::string::npos || m.name.ends_with(".experts")) {
          routed += m.numel();
        }
      }
      // routed is a multiple of experts (each expert the same shape): exact in integers.
      active_params_ -= routed / shape_.experts * (shape_.experts - shape_.experts_per_token);
    }
  }
}

// Forward FLOPs: a GEMM [T x k] x [k x n] costs 2*T*n*k (times token_factor: the routed experts
// see experts_per_token rows per token); attention costs 2*T*s*heads*(head_dim + value_dim) =
// 4*T*s*heads*head_dim when they are equal (QK^T and AV, each 2*s*s*d per head and sequence;
// Narayanan et al. 2021 count it so, without discounting the causal mask). Memory-bound ops add
// no FLOPs.
double Model::layer_forward_flops(size_t layer, int64_t seq, int64_t batch) const {
  assert(layer < layers_.size());
  const double tokens = static_cast<double>(seq) * static_cast<double>(batch);
  double flops = 0;
  for (const ComputeOp& op : layers_[layer].ops) {
    switch (op.kind) {
      case OpKind::kGemm:
        flops += 2.0 * tokens * op.token_factor * static_cast<double>(op.n) *
                 static_cast<double>(op.k);
        break;
      case OpKind::kAttention: {
        const int64_t dv = op.value_dim > 0 ? op.value_dim : op.head_dim;
        flops += 2.0 * tokens * static_cast<double>(seq) * static_cast<double>(op.heads) *
                 static_cast<double>(op.head_dim + dv);
        break;
      }
      case OpKind::kMemoryBound:
        break;
    }
  }
  return flops;
}

double Model::forward_flops(int64_t seq, int64_t batch) const {
  double flops = 0;
  for (size_t i = 0; i < layers_.size(); ++i) flops += layer_forward_flops(i, seq, batch);
  return flops;
}

double Model::forward_flops_share(int64_t seq, int64_t batch) const {
  const double flops = forward_flops(seq, batch);
  if (tensor_parallel_ == 1) return flops;
  const double tokens = static_cast<double>(seq) * static_cast<double>(batch);
  double replicated = 0;
  for (const Layer& layer : layers_) {
    for (const ComputeOp& op : layer.ops) {
      if (op.kind != OpKind::kGemm || op.tp != TpSplit::kReplicated) continue;
      replicated += 2.0 * tokens * op.token_factor * static_cast<double>(op.n) *
                    static_cast<double>(op.k);
    }
  }
  return flops - replicated * (1.0 - 1.0 / tensor_parallel_);
}

}  // namespace zplan::models
