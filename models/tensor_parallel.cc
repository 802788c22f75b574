#include "models/tensor_parallel.h"

#include <cassert>
#include <vector>

#include "base/input_error.h"

namespace zplan::models {

void check_tensor_parallel(const Model& model, int tp, const std::string& where) {
  if (tp <= 1) return;
  const ModelShape& m = model.shape();
  const std::string n = std::to_string(tp);
  auto refuse = [&](const std::string& why) { throw InputError(where, why); };
  if (m.family == Family::kMlp || m.heads == 0) {
    refuse("AutoTP splits a transformer's attention and MLP, and " +
           std::string(family_name(m.family)) + " has no attention");
  }
  if (m.moe()) refuse("not modelled: AutoTP with a mixture of experts");
  if (m.mla()) refuse("not modelled: AutoTP with multi-head latent attention");
  if (m.qk_norm == QkNorm::kFull) {
    refuse("not modelled: AutoTP with q/k norms over the whole projections (each rank holds "
           "1/" + n + " of them)");
  }
  if (model.finetune().lora()) refuse("not modelled: AutoTP with LoRA adapters");
  auto divides = [&](int64_t value, const char* what) {
    if (value % tp != 0) {
      refuse("AutoTP size " + n + " does not divide the model's " + std::to_string(value) + " " +
             what + " (each rank needs whole heads and an even share of the split weights)");
    }
  };
  divides(m.heads, "attention heads");
  divides(m.kv_heads, "key/value heads");
  divides(m.ffn, "MLP intermediate size");
}

Model tensor_parallel_shard(const Model& model, int tp) {
  assert(model.tensor_parallel() == 1);
  if (tp <= 1) return model;
  std::vector<Layer> layers = model.layers();
  for (Layer& layer : layers) {
    for (ComputeOp& op : layer.ops) {
      std::vector<Param>* params =
          op.module >= 0 ? &layer.modules[static_cast<size_t>(op.module)].params : nullptr;
      switch (op.tp) {
        case TpSplit::kReplicated:
          break;
        case TpSplit::kColumn:
          // LinearLayer._tp_partition: torch.chunk of the weight and the bias along dim 0.
          op.n /= tp;
          for (Param& p : *params) p.numel /= tp;
          break;
        case TpSplit::kRow:
          // LinearAllreduce._tp_partition: the weight along its last dim; the bias stays whole
          // ("don't slipt bias") and is added after the all-reduce.
          op.k /= tp;
          (*params)[0].numel /= tp;
          break;
        case TpSplit::kSplit:
          if (op.kind == OpKind::kAttention) {
            op.heads /= tp;
          } else {
            op.bytes_per_token /= tp;
            if (op.backward_bytes_per_token > 0) op.backward_bytes_per_token /= tp;
            op.fused.bytes_per_token /= tp;  // the kernel that replaces it works on the same split
            op.fused.backward_bytes_per_token /= tp;
          }
          break;
      }
    }
  }
  Model shard(model.shape(), std::move(layers), tp, model.num_params());
  shard.set_finetune(model.finetune());
  return shard;
}

}  // namespace zplan::models
