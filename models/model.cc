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
Model::Model(ModelShape shape, std::vector<Layer> layers)
    : shape_(std::move(shape)), layers_(std::move(layers)) {
  for (const Layer& layer : layers_) {
    num_params_ += layer.numel();
    for (const Module& m : layer.modules) {
      largest_module_params_ = std::max(largest_module_params_, m.numel());
      for (const Param& p : m.params) {
        largest_param_numel_ = std::max(largest_param_numel_, p.numel);
        if (m.tied_to.empty()) ++num_param_tensors_;
      }
    }
  }
}

// Forward FLOPs: a GEMM [T x k] x [k x n] costs 2*T*n*k; attention costs 4*T*s*heads*head_dim
// (QK^T and AV, each 2*s*s*head_dim per head and sequence; Narayanan et al. 2021 count it so,
// without discounting the causal mask). Memory-bound ops add no FLOPs.
double Model::layer_forward_flops(size_t layer, int64_t seq, int64_t batch) const {
  assert(layer < layers_.size());
  const double tokens = static_cast<double>(seq) * static_cast<double>(batch);
  double flops = 0;
  for (const ComputeOp& op : layers_[layer].ops) {
    switch (op.kind) {
      case OpKind::kGemm:
        flops += 2.0 * tokens * static_cast<double>(op.n) * static_cast<double>(op.k);
        break;
      case OpKind::kAttention:
        flops += 4.0 * tokens * static_cast<double>(seq) * static_cast<double>(op.heads) *
                 static_cast<double>(op.head_dim);
        break;
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

}  // namespace zplan::models
