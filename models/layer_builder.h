// The builder of one layer's modules, parameter tensors and forward ops, shared by the files that
// build a network from a ModelShape (models/model_builder.cc: embeddings, blocks, heads;
// models/moe_builder.cc: the sparse mixture-of-experts block). Not for use outside models/.
#ifndef ZPLAN_MODELS_LAYER_BUILDER_H_
#define ZPLAN_MODELS_LAYER_BUILDER_H_

#include <cstdint>
#include <string>
#include <utility>

#include "models/eager_ops.h"
#include "models/model.h"

namespace zplan::models::internal {

// Bytes per token of the elementwise kernels (16-bit elements):
//   dropout:      read x, write y and a 1-byte mask        2w + 2w + w = 5w
//   residual add: read two inputs, write the sum           6w (a three-way add: 8w)
//   GeLU / ReLU / SiLU: read and write one element         4w
//   SwiGLU product: read silu(gate) and up, write          6w
//   rotary:       read and write Q and K                   4 * (q_dim + kv_dim)
inline double dropout_bytes(int64_t w) { return 5.0 * static_cast<double>(w); }
inline double add_bytes(int64_t w, int inputs) { return 2.0 * static_cast<double>(w) * (inputs + 1); }

// Appends modules and ops to one layer.
class LayerBuilder {
 public:
  LayerBuilder(std::string name, LayerKind kind, bool checkpointed) {
    layer_.name = std::move(name);
    layer_.kind = kind;
    layer_.checkpointed_unit = checkpointed;
  }

  int add_module(Module module) {
    layer_.modules.push_back(std::move(module));
    return static_cast<int>(layer_.modules.size()) - 1;
  }

  // nn.Linear(in, out): weight out x in (GPT-2's Conv1D stores it transposed, same count), and
  // a GEMM with n = out, k = in. The weight is the module's first parameter, the bias its second
  // (tensor_parallel_shard splits them by `tp`).
  int linear(const std::string& name, int64_t in, int64_t out, bool bias,
             TpSplit tp = TpSplit::kReplicated) {
    Module m{name, {{name + ".weight", out * in}}, ""};
    if (bias) m.params.push_back({name + ".bias", out});
    int index = add_module(std::move(m));
    gemm(name, out, in, index);
    layer_.ops.back().tp = tp;
    return index;
  }

  void gemm(const std::string& name, int64_t n, int64_t k, int module) {
    ComputeOp op;
    op.name = name;
    op.kind = OpKind::kGemm;
    op.n = n;
    op.k = k;
    op.module = module;
    layer_.ops.push_back(op);
  }

  // The RMSNorm code of the family (ModelShape::rms_code) its norms run.
  RmsNormCode rms_code = RmsNormCode::kLlama;

  // Marks the last op as working on tensor-parallel-split activations (TpSplit::kSplit).
  void split_last_op() { layer_.ops.back().tp = TpSplit::kSplit; }

  // LayerNorm (weight, bias): native_layer_norm, one kernel that reads and writes one 16-bit
  // row, 4h bytes. RMSNorm (weight): Hugging Face's eager chain (internal::set_rms_norm).
  void norm(const std::string& name, int64_t width, Norm kind) { norm(name, width, kind, width); }

  // An embedding table rows x width; the lookup reads the int64 id and copies one row: 4w + 8.
  int embedding(const std::string& name, int64_t rows, int64_t width) {
    int index = add_module(Module{name, {{name + ".weight", rows * width}}, ""});
    memory_op(name, 4.0 * static_cast<double>(width) + 8.0, index);
    return index;
  }

  void memory_op(const std::string& name, double bytes_per_token, int module = -1) {
    ComputeOp op;
    op.name = name;
    op.kind = OpKind::kMemoryBound;
    op.bytes_per_token = bytes_per_token;
    op.module = module;
    layer_.ops.push_back(op);
  }

  void attention(const std::string& name, int64_t heads, int64_t head_dim, int64_t value_dim) {
    ComputeOp op;
    op.name = name;
    op.kind = OpKind::kAttention;
    op.tp = TpSplit::kSplit;  // AutoTP: each rank attends with its heads/tp
    op.heads = heads;
    op.head_dim = head_dim;
    op.value_dim = value_dim == head_dim ? 0 : value_dim;
    layer_.ops.push_back(op);
  }

  // A norm whose kernels read and write `row` elements per token (q/k norms: the whole
  // projection) while its weight has `width` elements.
  void norm(const std::string& name, int64_t width, Norm kind, int64_t row) {
    Module m{name, {{name + ".weight", width}}, "", /*norm=*/true};
    if (kind == Norm::kLayerNorm) m.params.push_back({name + ".bias", width});
    int index = add_module(std::move(m));
    if (kind == Norm::kLayerNorm) {
      memory_op(name, 4.0 * static_cast<double>(row), index);
      return;
    }
    memory_op(name, 0, index);
    internal::set_rms_norm(layer_.ops.back(), row, rms_code);
  }

  // Rotary position embedding on `width` elements of the queries and keys per token
  // (internal::rotary_op).
  void rotary(int64_t width, bool qwen_v1) {
    layer_.ops.push_back(internal::rotary_op(width, qwen_v1));
  }

  void set_moe_block() { layer_.moe_block = true; }
  Layer& layer() { return layer_; }

  Layer take() { return std::move(layer_); }

 private:
  Layer layer_;
};

// Appends the sparse MoE block of the block whose module names start with `prefix` (the router,
// the routed experts in the layout of the transformers release, the shared expert) to `b`.
void add_moe_mlp(LayerBuilder& b, const ModelShape& s, const std::string& prefix);

}  // namespace zplan::models::internal

#endif  // ZPLAN_MODELS_LAYER_BUILDER_H_
