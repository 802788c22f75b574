// ExecutorRank, continued: compute -- the pieces' forward and backward (a real MSE regression for
// MLP stacks, GEMMs of the right shapes for the other models), gradient hooks and the release of
// gathered parameters. "ref §x" = reference/deepspeed_internals.md.
#include <algorithm>
#include <cassert>
#include <vector>

#include "executor/rank_internal.h"

namespace zplan::executor {

// --- Compute ----------------------------------------------------------------------------------

float* ExecutorRank::param_data(int id, TaskId compute_task) {
  const ParamSlot& s = layout_.params()[static_cast<size_t>(id)];
  if (stage_ <= 2) return params_.data() + s.flat_offset;
  if (s.persistent) return persistent_full_[static_cast<size_t>(id)].data();
  TaskId g = predecessor(compute_task, TaskKind::kAllGather);
  assert(g != sim::kNoTask && "a stage-3 compute task without its gather");
  std::lock_guard<std::mutex> lock(gathered_mu_);
  auto it = gathered_.find(g);
  assert(it != gathered_.end());
  const sim::Task& gt = graph_->tasks()[g];
  const auto& ids = layout_.module_params(gt.layer, gt.index);
  size_t k = 0;
  for (int other : ids) {
    if (layout_.params()[static_cast<size_t>(other)].persistent) continue;
    if (other == id) return it->second[k].data();
    ++k;
  }
  assert(false && "parameter not in the gathered module");
  return nullptr;
}

float* ExecutorRank::grad_slot(int id) {
  return stage_ <= 1 ? full_grads_[static_cast<size_t>(id)].data()
                     : fresh_grads_[static_cast<size_t>(id)].data();
}

void ExecutorRank::prepare_grads(int piece) {
  // Stages 0-1 keep full gradients from the first micro-step to the step (later micro-steps add
  // into them); stages 2-3 get a fresh gradient per backward, which the hook empties.
  for (int id : layout_.piece_grads(piece)) {
    const size_t n = static_cast<size_t>(layout_.params()[static_cast<size_t>(id)].numel);
    if (stage_ <= 1) {
      // (The first micro-step's backward overwrites them: no zeroing.)
      if (full_grads_[static_cast<size_t>(id)].empty()) {
        full_grads_[static_cast<size_t>(id)] = Buffer(&mem_, Tier::kGpu, Category::kGrads, n);
      }
    } else {
      fresh_grads_[static_cast<size_t>(id)] = Buffer(&mem_, Tier::kGpu, Category::kGrads, n);
    }
  }
}

void ExecutorRank::hook_grads(int piece) {
  if (stage_ <= 1) return;
  for (int id : layout_.piece_grads(piece)) {
    ipg_->put(id, std::move(fresh_grads_[static_cast<size_t>(id)]));
  }
}

void ExecutorRank::forward(TaskId id, const sim::Task& t) {
  if (mlp_) {
    forward_mlp(id, t.layer);
  } else {
    forward_generic(id, t.index);
  }
}

void ExecutorRank::backward(TaskId id, const sim::Task& t) {
  const bool bucketed = stage_ == 2 || (stage_ == 1 && boundary_);
  if (bucketed && !ipg_->allocated()) ipg_->allocate();  // the first gradient hook (item 4)
  prepare_grads(t.index);
  if (mlp_) {
    backward_mlp(id, t.index, t.layer);
  } else {
    backward_generic(id, t.index);
  }
  hook_grads(t.index);
}

void ExecutorRank::forward_mlp(TaskId id, int layer) {
  // Linear(h, h) + ReLU; the last layer feeds the MSE loss. Each layer keeps its output (the
  // ReLU's result, which the next Linear keeps too; the last one's for the loss).
  const int64_t h = model_.shape().hidden;
  const size_t l = static_cast<size_t>(layer);
  const bool last = l + 1 == model_.layers().size();
  const auto& ids = layout_.module_params(layer, 0);
  const float* w = param_data(ids[0], id);
  const float* b = param_data(ids[1], id);
  const float* x = l == 0 ? input_.data() : act_[l - 1].data();
  act_[l] = Buffer(&mem_, Tier::kGpu, Category::kActivations, static_cast<size_t>(tokens_ * h));
  float* y = act_[l].data();
  dev_.fill_rows(y, b, tokens_, h);
  dev_.gemm(false, true, tokens_, h, h, 1.0f, x, h, w, h, 1.0f, y, h);
  const size_t n = static_cast<size_t>(tokens_ * h);
  if (!last) {
    dev_.relu(y, n);
  } else {
    loss_sq_ += dev_.squared_error(y, target_.data(), n);
    loss_n_ += static_cast<double>(n);
  }
}

void ExecutorRank::backward_mlp(TaskId id, int piece, int layer) {
  const int64_t h = model_.shape().hidden;
  const size_t l = static_cast<size_t>(layer);
  const bool last = l + 1 == model_.layers().size();
  const size_t n = static_cast<size_t>(tokens_ * h);
  Buffer dy;
  if (last) {
    // d mean((y - t)^2) / dy, and DeepSpeed's 1 / gas loss scaling.
    dy = Buffer(&mem_, Tier::kGpu, Category::kActivations, n);
    const float scale = 2.0f / static_cast<float>(n) / static_cast<float>(gas_);
    dev_.mse_grad(dy.data(), act_[l].data(), target_.data(), n, scale);
  } else {
    dy = std::move(grad_flow_);
    dev_.relu_backward(dy.data(), act_[l].data(), n);
  }
  const auto& ids = layout_.module_params(layer, 0);
  const float* w = param_data(ids[0], id);
  const float* x = l == 0 ? input_.data() : act_[l - 1].data();
  const bool accumulate = stage_ <= 1 && !first_;
  // dW = dy^T x, db = column sums of dy, dx = dy W (not for the first layer: its input is data).
  dev_.gemm(true, false, h, h, tokens_, 1.0f, dy.data(), h, x, h, accumulate ? 1.0f : 0.0f,
            grad_slot(ids[0]), h);
  dev_.column_sums(dy.data(), tokens_, h, grad_slot(ids[1]), accumulate);
  if (l > 0) {
    Buffer dx(&mem_, Tier::kGpu, Category::kActivations, n);
    dev_.gemm(false, false, tokens_, h, h, 1.0f, dy.data(), h, w, h, 0.0f, dx.data(), h);
    grad_flow_ = std::move(dx);
  }
  act_[l].reset();
  (void)piece;
}

bool ExecutorRank::first_piece_of_layer(int piece) const {
  const auto& pieces = builder_.pieces();
  return piece == 0 ||
         pieces[static_cast<size_t>(piece) - 1].layer != pieces[static_cast<size_t>(piece)].layer;
}

void ExecutorRank::forward_generic(TaskId id, int piece) {
  // Transformer-shaped models: the piece's GEMMs with their shapes, attention as its two batched
  // products, elementwise ops as memory passes; activations as the activation plan counts them.
  const sim::Piece& pc = builder_.pieces()[static_cast<size_t>(piece)];
  const models::Layer& layer = model_.layers()[static_cast<size_t>(pc.layer)];
  const size_t l = static_cast<size_t>(pc.layer);
  const bool layer_first = first_piece_of_layer(piece);
  const int64_t T = tokens_;
  Buffer extra;
  if (layer_first) {
    act_blob_[l] = Buffer(&mem_, Tier::kGpu,
                          acts_.checkpointed[l] ? Category::kCheckpoints : Category::kActivations,
                          static_cast<size_t>(acts_.kept[l] / 4));
    extra =
        Buffer(&mem_, Tier::kGpu, Category::kActivations, static_cast<size_t>(acts_.extra[l] / 4));
  }
  for (int oi = pc.first_op; oi < pc.end_op; ++oi) {
    const models::ComputeOp& op = layer.ops[static_cast<size_t>(oi)];
    switch (op.kind) {
      case models::OpKind::kGemm: {
        const float* w = scratch_w_.data();
        if (op.module >= 0) {
          for (int pid : layout_.module_params(pc.layer, op.module)) {
            if (layout_.params()[static_cast<size_t>(pid)].numel == op.n * op.k) {
              w = param_data(pid, id);
              break;
            }
          }
        }
        dev_.gemm(false, true, T, op.n, op.k, 1.0f, scratch_a_.data(), op.k, w, op.k, 0.0f,
                  scratch_b_.data(), op.n);
        break;
      }
      case models::OpKind::kAttention: {
        const int64_t s = workload_.seq_len, d = op.head_dim;
        const int64_t batches = config_.micro_batch * op.heads;
        for (int64_t bh = 0; bh < batches; ++bh) {
          dev_.gemm(false, true, s, s, d, 1.0f, scratch_a_.data(), d, scratch_a_.data(), d, 0.0f,
                    scratch_b_.data(), s);
          dev_.gemm(false, false, s, d, s, 1.0f, scratch_b_.data(), s, scratch_a_.data(), d, 0.0f,
                    scratch_w_.data(), d);
        }
        break;
      }
      case models::OpKind::kMemoryBound:
        dev_.memory_pass(scratch_b_.data(), op.bytes_per_token * static_cast<double>(T) * 2.0);
        break;
    }
  }
}

void ExecutorRank::backward_generic(TaskId id, int piece) {
  const sim::Piece& pc = builder_.pieces()[static_cast<size_t>(piece)];
  const models::Layer& layer = model_.layers()[static_cast<size_t>(pc.layer)];
  const size_t l = static_cast<size_t>(pc.layer);
  const bool layer_first = first_piece_of_layer(piece);
  const int64_t T = tokens_;
  const bool accumulate = stage_ <= 1 && !first_;
  Buffer workspace(&mem_, Tier::kGpu, Category::kActivations,
                   static_cast<size_t>(acts_.extra[l] / 4));
  std::vector<int> done;
  for (int oi = pc.end_op; oi-- > pc.first_op;) {
    const models::ComputeOp& op = layer.ops[static_cast<size_t>(oi)];
    switch (op.kind) {
      case models::OpKind::kGemm: {
        const float* w = scratch_w_.data();
        float* dw = scratch_w_.data();
        float* db = nullptr;
        if (op.module >= 0) {
          for (int pid : layout_.module_params(pc.layer, op.module)) {
            const ParamSlot& s = layout_.params()[static_cast<size_t>(pid)];
            bool mine =
                std::find(layout_.piece_grads(piece).begin(), layout_.piece_grads(piece).end(),
                          pid) != layout_.piece_grads(piece).end();
            if (s.numel == op.n * op.k) {
              w = param_data(pid, id);
              if (mine) {
                dw = grad_slot(pid);
                done.push_back(pid);
              }
            } else if (s.numel == op.n && mine) {
              db = grad_slot(pid);
              done.push_back(pid);
            }
          }
        }
        dev_.gemm(false, false, T, op.k, op.n, 1.0f, scratch_b_.data(), op.n, w, op.k, 0.0f,
                  scratch_a_.data(), op.k);
        dev_.gemm(true, false, op.n, op.k, T, 1.0f, scratch_b_.data(), op.n, scratch_a_.data(),
                  op.k, accumulate && dw != scratch_w_.data() ? 1.0f : 0.0f, dw, op.k);
        if (db != nullptr) dev_.column_sums(scratch_b_.data(), T, op.n, db, accumulate);
        break;
      }
      case models::OpKind::kAttention: {
        const int64_t s = workload_.seq_len, d = op.head_dim;
        const int64_t batches = config_.micro_batch * op.heads;
        for (int rep = 0; rep < 2; ++rep) {
          for (int64_t bh = 0; bh < batches; ++bh) {
            dev_.gemm(false, true, s, s, d, 1.0f, scratch_a_.data(), d, scratch_a_.data(), d, 0.0f,
                      scratch_b_.data(), s);
            dev_.gemm(false, false, s, d, s, 1.0f, scratch_b_.data(), s, scratch_a_.data(), d, 0.0f,
                      scratch_w_.data(), d);
          }
        }
        break;
      }
      case models::OpKind::kMemoryBound:
        dev_.memory_pass(scratch_b_.data(), op.backward_bytes() * static_cast<double>(T) * 2.0);
        break;
    }
  }
  // Gradients no GEMM produced (norms, embeddings): a pass that zeroes them (first micro-step).
  for (int pid : layout_.piece_grads(piece)) {
    if (std::find(done.begin(), done.end(), pid) != done.end()) continue;
    if (!accumulate) {
      dev_.zero(grad_slot(pid),
                static_cast<size_t>(layout_.params()[static_cast<size_t>(pid)].numel));
    }
  }
  workspace.reset();
  if (layer_first) act_blob_[l].reset();
}

bool ExecutorRank::releases_gathered(const sim::Task& t) const {
  // The graph says where DeepSpeed's coordinator releases a module (max_reuse_distance): at the
  // end of the use that frees gathered parameters.
  const auto& eff = graph_->effects();
  for (uint32_t i = t.effects_begin; i < t.effects_begin + t.effects_count; ++i) {
    const sim::MemEffect& e = eff[i];
    if (e.at_end && e.tier == Tier::kGpu && e.category == Category::kGatheredParams &&
        e.bytes < 0) {
      return true;
    }
  }
  return false;
}

void ExecutorRank::release_gathered(TaskId id, const sim::Task& t) {
  if (!releases_gathered(t)) return;
  TaskId g = predecessor(id, TaskKind::kAllGather);
  if (g == sim::kNoTask) return;
  std::vector<Buffer> released;
  {
    std::lock_guard<std::mutex> lock(gathered_mu_);
    auto it = gathered_.find(g);
    if (it == gathered_.end()) return;
    released = std::move(it->second);
    gathered_.erase(it);
  }
  if (secondary_.empty()) return;
  // hpZ: partition_parameters.py _partition -> _partition_param_sec keeps this rank's
  // secondary piece of each parameter before the gathered tensor is freed.
  const sim::Task& gt = graph_->tasks()[g];
  size_t k = 0;
  for (int pid : layout_.module_params(gt.layer, gt.index)) {
    if (layout_.params()[static_cast<size_t>(pid)].persistent) continue;
    fill_secondary(pid, released[k++].data());
  }
}

}  // namespace zplan::executor
