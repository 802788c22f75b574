#include "sim/sequence_parallel.h"

#include <algorithm>

#include "base/input_error.h"

namespace zplan::sim {

CommGroup sequence_parallel_group(int sp, const hardware::Cluster& cluster) {
  const int g = cluster.gpus_per_node();
  return CommGroup{sp, sp <= g ? 1 : sp / g};
}

void check_sequence_parallel(const models::Model& model,
                             const Workload& workload, const hardware::Cluster& cluster,
                             const std::string& where) {
  const int sp = workload.sequence_parallel;
  if (sp == 1) return;
  const std::string at = json_location(where, "/sequence_parallel_size");
  const std::string n = std::to_string(sp);
  const models::ModelShape& m = model.shape();
  if (m.family == models::Family::kMlp || m.heads == 0) {
    throw InputError(at, "Ulysses sequence parallelism splits attention heads, and " +
                             std::string(models::family_name(m.family)) + " has no attention");
  }
  if (m.mla()) {
    throw InputError(at, "not modelled: Ulysses sequence parallelism with multi-head latent "
                         "attention (its all-to-alls move per-head widths zplan does not model)");
  }
  // UlyssesSPAttentionHF.__init__ (runtime/sequence_parallel/ulysses_sp.py) raises on both.
  if (m.heads % sp != 0) {
    throw InputError(at, "Ulysses sequence parallel size " + n + " does not divide the model's " +
                             std::to_string(m.heads) + " attention heads (DeepSpeed raises)");
  }
  if (m.kv_heads % sp != 0 && sp % m.kv_heads != 0) {
    throw InputError(at, "Ulysses sequence parallel size " + n + " and the model's " +
                             std::to_string(m.kv_heads) +
                             " key/value heads do not divide one another (DeepSpeed raises)");
  }
  // UlyssesSPDataLoaderAdapter: "batch's seqlen ... isn't divisible by sp-size".
  if (workload.seq_len % sp != 0) {
    throw InputError(at, "Ulysses sequence parallel size " + n + " does not divide the " +
                             std::to_string(workload.seq_len) +
                             "-token sequence (DeepSpeed raises); change --seq-len");
  }
  const int g = cluster.gpus_per_node();
  if (std::string problem = groups_split_nodes("sequence-parallel groups", sp, g);
      !problem.empty()) {
    throw InputError(at, problem);
  }
}

UlyssesAllToAll ulysses_all_to_all_bytes(const models::ModelShape& shape, double local_tokens,
                                         int dtype_bytes, int sp) {
  const double d = static_cast<double>(shape.head_dim);
  const double heads = static_cast<double>(shape.heads);
  // Fewer key/value heads than ranks: each is repeated (repeat_interleave) to sp heads before
  // the all-to-all (UlyssesSPAttentionHF._combine_local_sequences).
  const double kv = static_cast<double>(std::max<int64_t>(shape.kv_heads, sp));
  UlyssesAllToAll a;
  a.q_bytes = local_tokens * heads * d * dtype_bytes;
  a.kv_bytes = local_tokens * kv * d * dtype_bytes;
  a.out_bytes = local_tokens * heads * d * dtype_bytes;
  return a;
}

void add_ulysses_all_to_all(std::vector<Piece>& pieces, const models::Model& model,
                            const hardware::Cluster& cluster, const Workload& workload,
                            const DsConfig& config) {
  const int sp = workload.sequence_parallel;
  if (sp == 1) return;
  const double local_tokens =
      static_cast<double>(workload.seq_len / sp) * static_cast<double>(config.micro_batch);
  const UlyssesAllToAll bytes = ulysses_all_to_all_bytes(
      model.shape(), local_tokens, precision_bytes(config.precision), sp);
  const CommGroup group = sequence_parallel_group(sp, cluster);
  // q, k and v are three all-to-alls (one per tensor, _combine_local_sequences), the output one.
  auto cost = [&](double b) { return group_all_to_all_cost(cluster, b, group).total_s(); };
  const double q_kv = cost(bytes.q_bytes) + 2 * cost(bytes.kv_bytes);
  const double out = cost(bytes.out_bytes);
  for (Piece& pc : pieces) {
    const models::Layer& layer = model.layers()[static_cast<size_t>(pc.layer)];
    for (int oi = pc.first_op; oi < pc.end_op; ++oi) {
      if (layer.ops[static_cast<size_t>(oi)].kind != models::OpKind::kAttention) continue;
      pc.fwd_s += q_kv + out;
      if (!pc.no_grad) pc.bwd_s += q_kv + out;
    }
  }
}

}  // namespace zplan::sim
