#include "sim/step_costs.h"

#include <algorithm>

#include "hardware/cost_model.h"

namespace zplan::sim {

EagerSoftmaxBytes eager_softmax_bytes(int dtype_bytes, bool upcast, bool dropout) {
  const double d = dtype_bytes;
  EagerSoftmaxBytes e;
  if (upcast) {
    // Per score element, with a cast pass u = D + 4 when D < 4 (none in fp32): forward: the
    // scaling multiply (read D, write D), the mask add (read D and the mask's D, write D), the
    // upcast to fp32 (u), the softmax (read 4, write 4), the cast back (u); backward: the cast's
    // gradient (u), softmax's backward (read the gradient and the output, write one: 12), the
    // cast of its result back (u) and the scaling's gradient (2D).
    const double u = dtype_bytes < 4 ? d + 4 : 0;
    e = {5 * d + 8 + 2 * u, 12 + 2 * u + 2 * d};
  } else {
    // GPT2Attention._attn (transformers 4.x; OPT's and NeoX's alike in kind): forward: the
    // scaling (read D, write D), the causal mask's torch.where (read D, write D; the [1, 1, s, s]
    // bool buffer is broadcast over batch and heads), the attention_mask add (read D, write D;
    // the [b, 1, 1, s] mask is broadcast), softmax in the compute dtype (read D, write D): 8D.
    // Backward: softmax's (read the output and the gradient, write one: 3D), the where's (2D) and
    // the scaling's (2D); the mask add passes the gradient through: 7D.
    e = {8 * d, 7 * d};
  }
  if (dropout) {
    // attn_dropout on the probabilities: read D, write D and the 1-byte mask; backward reads the
    // gradient and the mask and writes D.
    e.forward += 2 * d + 1;
    e.backward += 2 * d + 1;
  }
  return e;
}

namespace {

struct OpTime {
  double fwd_s = 0, bwd_s = 0, fwd_flops = 0, bwd_flops = 0;
  double fwd_extra_flops = 0, bwd_extra_flops = 0;  // of those, not the model's (Piece)
  double fwd_ops = 1, bwd_ops = 2;                  // host operators (piece_host_ops)
};

// Whether the step runs an op's fused kernel in place of its eager chain (ComputeOp::fused):
// Liger's under --loss liger, flash-attn's where the model's code imports it with
// FlashAttention-2.
bool runs_fused(const models::ComputeOp& op, const Workload& workload) {
  switch (op.fused.by) {
    case models::FusedBy::kNone:
      return false;
    case models::FusedBy::kLiger:
      return workload.fused_swiglu;
    case models::FusedBy::kFlashAttn:
      return workload.attention == Attention::kFlash2;
  }
  return false;
}

// n kernels moving `bytes` in all: one memory-bound pass plus a launch for each further kernel.
double kernels_time_s(const hardware::GpuSpec& gpu, double bytes, int n) {
  if (n <= 0) return 0;
  return hardware::memory_bound_time_s(gpu, bytes) + (n - 1) * gpu.kernel_launch_s;
}

// Forward and backward time of one operation over T = batch * seq tokens.
OpTime op_time(const models::ComputeOp& op, const hardware::GpuSpec& gpu, double seq,
               double batch, int dtype_bytes, const Workload& workload,
               const EagerSoftmaxBytes& eager) {
  const bool flash = workload.fused_attention();
  using hardware::gemm_time_s;
  const double tokens = seq * batch;
  OpTime t;
  switch (op.kind) {
    case models::OpKind::kGemm: {
      const double n = static_cast<double>(op.n), k = static_cast<double>(op.k);
      // Y[T x n] = X[T x k] W[k x n]; backward: dX = dY W^T [T x k] and dW = X^T dY [k x n].
      // A routed expert (token_factor = experts_per_token / experts): its own GEMM over its
      // share of the routed rows, as the modeling code's loop over the experts runs it.
      const double rows = tokens * op.token_factor;
      // A frozen weight (requires_grad false) needs no dW: mm's backward computes only the
      // gradients of the inputs that require grad (PyTorch's derivatives.yaml for mm/addmm,
      // each formula under grad_input_mask), so backward is one GEMM, 1x the forward FLOPs.
      // A grouped GEMM (transformers 5's experts under torch._grouped_mm): `groups` GEMMs of
      // rows / groups rows each, every one at its own shape's efficiency; its backward is two
      // grouped GEMMs, dX per group and dW per group (k x n over the group's rows). On Hopper
      // and Blackwell PyTorch runs them as one CUTLASS kernel, one launch; before them its
      // fallback (ATen GroupedMMUtils.h, PyTorch PR #161407) loops over the groups with one mm
      // each, a launch apiece (and a device-to-host read of the offsets, not priced). A
      // torch.bmm over the groups (`batched`, Llama 4's experts) is one kernel on every GPU.
      const double g = static_cast<double>(std::max<int64_t>(1, op.groups));
      const bool one_kernel = op.batched || gpu.arch == hardware::Arch::kHopper ||
                              gpu.arch == hardware::Arch::kBlackwell;
      auto grouped = [&](double m, double nn, double kk) {
        const double one = gemm_time_s(gpu, m, nn, kk, dtype_bytes);
        if (g <= 1 || !(one > 0)) return one;
        return one_kernel ? g * (one - gpu.kernel_launch_s) + gpu.kernel_launch_s : g * one;
      };
      const double rows_g = rows / g;
      t.fwd_s = grouped(rows_g, n, k);
      t.bwd_s = grouped(rows_g, k, n);
      if (!op.frozen_weight) t.bwd_s += grouped(k, n, rows_g);
      t.fwd_flops = 2 * rows * n * k;
      t.bwd_flops = (op.frozen_weight ? 1 : 2) * t.fwd_flops;
      t.fwd_extra_flops = (1 - op.model_flops_fraction) * t.fwd_flops;
      t.bwd_extra_flops = (1 - op.model_flops_fraction) * t.bwd_flops;
      break;
    }
    case models::OpKind::kAttention: {
      // QK^T and PV over the sequence: 4 * T * s * h * d FLOPs (the model FLOPs MFU counts,
      // causal mask not discounted). A fused kernel (sdpa's flash / memory-efficient backends,
      // FlashAttention-2/3) skips the blocks the causal mask hides, so it executes about half of
      // them (kCausalFraction), at the profile's attention efficiency -- which Dao's FA2 paper
      // measures against the same halved count for causal runs -- and its backward recomputes
      // the scores (2.5x). Eager attention computes the full s x s products as batched GEMMs
      // ([b*h*s x s] over d, [b*h*s x d] over s; backward twice the forward) and runs the
      // softmax and its casts as separate memory-bound kernels over the a*s*s*b scores.
      const double heads = static_cast<double>(op.heads), d = static_cast<double>(op.head_dim);
      const double dv = op.value_dim > 0 ? static_cast<double>(op.value_dim) : d;
      t.fwd_flops = 2 * tokens * seq * heads * (d + dv);
      t.bwd_flops = 2 * t.fwd_flops;
      if (flash) {
        const double executed = kCausalFraction * t.fwd_flops;
        const bool flash3 = workload.attention == Attention::kFlash3;
        t.fwd_s = hardware::attention_time_s(gpu, executed, dtype_bytes, flash3);
        t.bwd_s =
            hardware::attention_time_s(gpu, kFlashBackwardFactor * executed, dtype_bytes, flash3);
      } else {
        const double rows = batch * heads * seq;
        t.fwd_s = gemm_time_s(gpu, rows, seq, d, dtype_bytes) +
                  gemm_time_s(gpu, rows, dv, seq, dtype_bytes);
        t.bwd_s = 2 * t.fwd_s;
        const double scores = rows * seq;
        t.fwd_s += hardware::memory_bound_time_s(gpu, eager.forward * scores);
        t.bwd_s += hardware::memory_bound_time_s(gpu, eager.backward * scores);
      }
      break;
    }
    case models::OpKind::kMemoryBound: {
      // bytes_per_token is counted for 16-bit activations; backward reads and writes about twice
      // as much (the activation and its gradient) unless the op says what its backward moves.
      // An eager chain launches op.kernels kernels (the fused kernel that replaces it, fewer).
      const double scale = tokens * dtype_bytes / 2.0;
      if (runs_fused(op, workload)) {
        t.fwd_s = kernels_time_s(gpu, op.fused.bytes_per_token * scale, op.fused.kernels);
        t.bwd_s = kernels_time_s(gpu, op.fused.backward_bytes_per_token * scale, op.fused.kernels);
        t.fwd_ops = op.fused.kernels;
        t.bwd_ops = op.fused.kernels;
      } else {
        t.fwd_s = kernels_time_s(gpu, op.bytes_per_token * scale, op.kernels);
        t.bwd_s = kernels_time_s(gpu, op.backward_bytes() * scale, op.backward_kernel_count());
        t.fwd_ops = op.kernels;
        t.bwd_ops = op.backward_kernel_count();
      }
      break;
    }
  }
  return t;
}

// True iff two layers have the same compute and parameters (transformer blocks do), so that
// their pieces cost the same.
bool same_compute(const models::Layer& a, const models::Layer& b) {
  if (a.kind != b.kind || a.ops.size() != b.ops.size() || a.modules.size() != b.modules.size() ||
      a.no_grad != b.no_grad) {
    return false;
  }
  for (size_t i = 0; i < a.ops.size(); ++i) {
    const models::ComputeOp& x = a.ops[i];
    const models::ComputeOp& y = b.ops[i];
    if (x.kind != y.kind || x.n != y.n || x.k != y.k || x.heads != y.heads ||
        x.head_dim != y.head_dim || x.value_dim != y.value_dim ||
        x.bytes_per_token != y.bytes_per_token ||
        x.backward_bytes_per_token != y.backward_bytes_per_token || x.module != y.module ||
        x.token_factor != y.token_factor || x.frozen_weight != y.frozen_weight ||
        x.groups != y.groups || x.batched != y.batched ||
        x.model_flops_fraction != y.model_flops_fraction || x.kernels != y.kernels ||
        x.backward_kernels != y.backward_kernels || x.fused != y.fused) {
      return false;
    }
  }
  for (size_t m = 0; m < a.modules.size(); ++m) {
    const auto& pa = a.modules[m].params;
    const auto& pb = b.modules[m].params;
    if (pa.size() != pb.size() || a.modules[m].tied_to.empty() != b.modules[m].tied_to.empty()) {
      return false;
    }
    for (size_t k = 0; k < pa.size(); ++k) {
      if (pa[k].numel != pb[k].numel || pa[k].trainable != pb[k].trainable) return false;
    }
  }
  return true;
}

}  // namespace

double stage3_fetch_host_ops(double params) {
  // Counted from the source [est: one Python call that touches a tensor or the CUDA runtime = one
  // operator's host time]. fetch_sub_module: all_gather_coalesced's flat buffer (torch.empty),
  // the copy of this rank's partition into it and the all_gather_into_tensor launch (3); then per
  // parameter the handle's wait with its torch.cat/view into param.data, and an Event() plus
  // record() for the ongoing-fetch queue (3); then current_stream().wait_stream(allgather
  // stream) (1). release_sub_module: per parameter __release_param -> partition() -> free_param,
  // record_stream and param.data = torch.empty(0) (2). Total 4 + 5 per parameter.
  constexpr double kPerFetch = 4;
  constexpr double kPerParam = 5;
  return params > 0 ? kPerFetch + kPerParam * params : 0.0;
}

HostOps piece_host_ops(const Piece& piece, bool stage3) {
  // Stage 3: the pre-forward (and pre-backward) hook fetches the piece's module, the post hook
  // releases it; both run on the thread that issues the piece's kernels.
  const bool fetches = stage3 && piece.fetch_module >= 0;
  const double fetch = fetches ? stage3_fetch_host_ops(piece.fetch_params) : 0.0;
  HostOps h;
  h.fwd = piece.fwd_ops + fetch;
  h.bwd = piece.no_grad ? 0 : piece.bwd_ops + fetch + static_cast<double>(piece.grads.size());
  h.fetch_fwd = fetches ? 1 : 0;
  h.fetch_bwd = fetches && !piece.no_grad ? 1 : 0;
  return h;
}

std::vector<Piece> plan_pieces(const models::Model& model, const hardware::Profile& profile,
                               const DsConfig& config, const Workload& workload,
                               const ZeroSizes& sizes) {
  const hardware::GpuSpec& gpu = profile.gpu;
  const bool stage3 = config.zero.stage == 3;
  const int dtype = precision_bytes(config.precision);
  // Ulysses (sim/sequence_parallel.h): every op runs on the rank's s/sp tokens but attention,
  // which runs heads/sp over the whole sequence after the all-to-all.
  const int sp = workload.sequence_parallel;
  const double full_seq = static_cast<double>(workload.seq_len);
  const double seq = full_seq / sp;
  const double batch = static_cast<double>(config.micro_batch);
  const EagerSoftmaxBytes eager = eager_softmax_bytes(
      dtype, model.shape().eager_softmax_upcast(), model.shape().attention_probs_dropout());
  std::vector<Piece> pieces;
  const auto& layers = model.layers();
  size_t prev_first = 0;  // pieces of the previous layer: [prev_first, pieces.size())
  for (size_t li = 0; li < layers.size(); ++li) {
    const models::Layer& layer = layers[li];
    const size_t first_piece = pieces.size();
    // Identical blocks cost the same; with stage 3 they are also cut the same way as long as
    // the same modules need gathering.
    if (li > 0 && same_compute(layer, layers[li - 1]) &&
        (!stage3 || (sizes.module_fetch[li] == sizes.module_fetch[li - 1] &&
                     sizes.module_fetch_tensors[li] == sizes.module_fetch_tensors[li - 1]))) {
      for (size_t p = prev_first; p < first_piece; ++p) {
        pieces.push_back(pieces[p]);
        pieces.back().layer = static_cast<int>(li);
      }
      prev_first = first_piece;
      continue;
    }
    prev_first = first_piece;
    auto needs_fetch = [&](int module) {
      return stage3 && module >= 0 && sizes.module_fetch[li][module] > 0;
    };
    // Cut before every op that needs a gathered module, except the layer's first such op: the ops
    // before it join its piece (they run after the gather in this model).
    Piece cur;
    cur.layer = static_cast<int>(li);
    bool cur_has_fetch = false;
    const int n_ops = static_cast<int>(layer.ops.size());
    for (int oi = 0; oi < n_ops; ++oi) {
      const models::ComputeOp& op = layer.ops[oi];
      if (needs_fetch(op.module) && op.module != cur.fetch_module) {
        if (cur_has_fetch) {
          cur.end_op = oi;
          pieces.push_back(cur);
          cur = Piece();
          cur.layer = static_cast<int>(li);
          cur.first_op = oi;
        }
        cur.fetch_module = op.module;
        cur.fetch_params = sizes.module_fetch_tensors[li][op.module];
        cur_has_fetch = true;
      }
      OpTime t;
      if (op.kind == models::OpKind::kAttention && sp > 1) {
        models::ComputeOp local = op;
        local.heads = op.heads / sp;  // check_sequence_parallel: sp divides the heads
        t = op_time(local, gpu, full_seq, batch, dtype, workload, eager);
      } else {
        t = op_time(op, gpu, seq, batch, dtype, workload, eager);
      }
      // What a real training step sustains of the kernel roofline (GpuSpec::framework_efficiency:
      // launch gaps, hooks, allocator work between the eager kernels of a layer) divides every
      // op but a fused attention kernel: its time is one kernel's, growing with s^2 (the
      // profile's attention_efficiency is already that kernel's measured rate, Dao 2023 §4.1), and
      // the gaps between a layer's kernels do not grow with it. Measured: Llama-3.1-8B on H200
      // with FlashAttention-3 sustains 419-422 model TFLOP/s from 128K to 256K tokens
      // (docs/fidelity.md, mleng-h200), which with recompute is >= 0.52 of peak in attention
      // alone (attention is 82% of the FLOPs at 256K); dividing by framework_efficiency would
      // need the kernel at >= 0.9 of peak, above FlashAttention-3's best forward (75%).
      const double sustained =
          op.kind == models::OpKind::kAttention && workload.fused_attention()
              ? 1.0
              : gpu.framework_efficiency;
      cur.fwd_s += t.fwd_s / sustained;  // launch overheads are in the cost functions
      cur.bwd_s += t.bwd_s / sustained;
      cur.fwd_flops += t.fwd_flops;
      cur.bwd_flops += t.bwd_flops;
      cur.fwd_extra_flops += t.fwd_extra_flops;
      cur.bwd_extra_flops += t.bwd_extra_flops;
      cur.fwd_ops += t.fwd_ops;
      cur.bwd_ops += t.bwd_ops;
    }
    cur.end_op = n_ops;
    pieces.push_back(cur);
    for (size_t p = first_piece; p < pieces.size(); ++p) {
      // No gradient reaches the layer (models/finetune.h): autograd runs nothing for it.
      if (layer.no_grad) {
        pieces[p].no_grad = true;
        pieces[p].bwd_s = 0;
        pieces[p].bwd_flops = 0;
        pieces[p].bwd_extra_flops = 0;
      }
    }
    // Gradients: each module's parameters belong to the piece of the first op that uses it (else
    // the layer's first piece); tied modules produce none of their own (the owner's hook fires
    // once both uses have added into the shared gradient).
    std::vector<int> owner(layer.modules.size(), static_cast<int>(first_piece));
    std::vector<bool> seen(layer.modules.size(), false);
    for (size_t p = first_piece; p < pieces.size(); ++p) {
      for (int oi = pieces[p].first_op; oi < pieces[p].end_op; ++oi) {
        int m = layer.ops[oi].module;
        if (m >= 0 && !seen[m]) {
          seen[m] = true;
          owner[m] = static_cast<int>(p);
        }
      }
    }
    for (size_t m = layer.modules.size(); m-- > 0;) {
      if (!layer.modules[m].tied_to.empty()) continue;
      const auto& params = layer.modules[m].params;
      for (size_t k = params.size(); k-- > 0;) {
        // Frozen parameters have no gradient: no hook, no bucket, no reduction.
        if (!params[k].trainable) continue;
        pieces[owner[m]].grads.push_back(static_cast<double>(params[k].numel));
      }
    }
    // The host-side floor (framework term): the GPU cannot run ahead of the Python thread that
    // issues its kernels (hardware::host_dispatch_s).
    for (size_t p = first_piece; p < pieces.size(); ++p) {
      const HostOps h = piece_host_ops(pieces[p], stage3);
      Piece& pc = pieces[p];
      const double fwd_host = hardware::host_dispatch_s(profile, h.fwd) +
                              hardware::stage3_hook_s(profile, h.fetch_fwd);
      const double bwd_host = hardware::host_dispatch_s(profile, h.bwd) +
                              hardware::stage3_hook_s(profile, h.fetch_bwd);
      pc.fwd_host_s = std::max(0.0, fwd_host - pc.fwd_s);
      pc.bwd_host_s = std::max(0.0, bwd_host - pc.bwd_s);
      pc.fwd_s += pc.fwd_host_s;
      pc.bwd_s += pc.bwd_host_s;
    }
  }
  return pieces;
}

}  // namespace zplan::sim
