#include "sim/tensor_parallel.h"

#include <algorithm>
#include <cassert>

#include "base/input_error.h"
#include "hardware/cost_model.h"
#include "models/tensor_parallel.h"

namespace zplan::sim {

namespace {

// Bytes of the tensor a split linear's all-reduce moves for `tokens` tokens: the row-split
// linear's output (its full out-features, n), the column-split linear's input gradient (its full
// in-features, k), in the training dtype.
double all_reduce_bytes(const models::ComputeOp& op, double tokens, int dtype_bytes) {
  const double width = static_cast<double>(op.tp == models::TpSplit::kRow ? op.n : op.k);
  return tokens * op.token_factor * width * dtype_bytes;
}

}  // namespace

int data_parallel_ranks(const hardware::Cluster& cluster, const Workload& workload) {
  return cluster.gpus / workload.tensor_parallel;
}

CommGroup data_parallel_group(const hardware::Cluster& cluster, const Workload& workload) {
  return CommGroup{data_parallel_ranks(cluster, workload), cluster.nodes};
}

CommGroup tensor_parallel_group(const Workload& workload) {
  return CommGroup{workload.tensor_parallel, 1};
}

void check_tensor_parallel(const models::Model& model, const DsConfig& config,
                           const Workload& workload, const hardware::Cluster& cluster,
                           const std::string& where) {
  const int tp = workload.tensor_parallel;
  if (tp <= 1) return;
  const std::string n = std::to_string(tp);
  const int g = cluster.gpus_per_node();
  if (g % tp != 0) {
    throw InputError(where, "not modelled: AutoTP groups of " + n + " GPUs that do not divide a "
                            "node of " + std::to_string(g) +
                            " (zplan keeps each tensor-parallel group inside a node)");
  }
  const ZeroConfig& z = config.zero;
  if (z.hpz() || z.mics() || (z.stage == 3 && (z.quantized_weights || z.quantized_gradients))) {
    throw InputError(where, "not modelled: AutoTP with ZeRO++ or MiCS (their groups would be "
                            "built inside the data-parallel group); remove one of them");
  }
  models::check_tensor_parallel(model, tp, where);
}

TensorParallelTraffic tensor_parallel_traffic(const models::Model& model, const DsConfig& config,
                                              const Workload& workload,
                                              const std::vector<bool>& checkpointed) {
  TensorParallelTraffic t;
  if (workload.tensor_parallel <= 1) return t;
  assert(model.tensor_parallel() == workload.tensor_parallel);
  const double tokens =
      static_cast<double>(workload.seq_len) * static_cast<double>(config.micro_batch);
  const int dtype = precision_bytes(config.precision);
  const auto& layers = model.layers();
  for (size_t li = 0; li < layers.size(); ++li) {
    const models::Layer& layer = layers[li];
    const bool recomputed = li < checkpointed.size() && checkpointed[li];
    for (const models::ComputeOp& op : layer.ops) {
      const double bytes = all_reduce_bytes(op, tokens, dtype);
      if (op.tp == models::TpSplit::kRow) {
        ++t.forward_count;
        t.forward_bytes += bytes;
        if (recomputed) {
          ++t.recompute_count;
          t.recompute_bytes += bytes;
        }
      } else if (op.tp == models::TpSplit::kColumn && !layer.no_grad) {
        ++t.backward_count;
        t.backward_bytes += bytes;
      }
    }
  }
  return t;
}

void add_tensor_parallel_all_reduces(std::vector<Piece>& pieces, const models::Model& model,
                                     const hardware::Cluster& cluster, const DsConfig& config,
                                     const Workload& workload) {
  if (workload.tensor_parallel <= 1) return;
  assert(model.tensor_parallel() == workload.tensor_parallel);
  const CommGroup group = tensor_parallel_group(workload);
  const hardware::GpuSpec& gpu = cluster.profile.gpu;
  const double tokens =
      static_cast<double>(workload.seq_len) * static_cast<double>(config.micro_batch);
  const int dtype = precision_bytes(config.precision);
  auto all_reduce_s = [&](double bytes) {
    return group_collective_cost(cluster, hardware::Collective::kAllReduce, bytes, group)
        .total_s();
  };
  for (Piece& pc : pieces) {
    const models::Layer& layer = model.layers()[static_cast<size_t>(pc.layer)];
    for (int oi = pc.first_op; oi < pc.end_op; ++oi) {
      const models::ComputeOp& op = layer.ops[static_cast<size_t>(oi)];
      if (op.tp == models::TpSplit::kRow) {
        pc.fwd_s += all_reduce_s(all_reduce_bytes(op, tokens, dtype));
      } else if (op.tp == models::TpSplit::kColumn && !pc.no_grad) {
        double exposed = all_reduce_s(all_reduce_bytes(op, tokens, dtype));
        if (workload.tp_overlap_comm && !op.frozen_weight) {
          // grad_weight = grad_output^T x input: [k x n] over the rows, at the framework's rate
          // like every GEMM of the piece (step_costs.cc).
          const double rows = tokens * op.token_factor;
          const double weight_grad_s =
              hardware::gemm_time_s(gpu, static_cast<double>(op.k), static_cast<double>(op.n),
                                    rows, dtype) /
              gpu.framework_efficiency;
          exposed = std::max(0.0, exposed - weight_grad_s);
        }
        pc.bwd_s += exposed;
      }
    }
  }
}

}  // namespace zplan::sim
