// The compute side of a step: a layer's forward operations grouped into the pieces the step graph
// schedules, each with its forward and backward time on a GPU (hardware/cost_model.h) and the
// parameter gradients its backward produces.
//
// Stages 0-2 schedule one piece per layer. Stage 3 cuts a layer where an operation needs a
// module whose parameters must be gathered first, because that is where DeepSpeed's pre-forward
// hook waits for the gather (reference/deepspeed_internals.md §2.2 item 8).
#ifndef ZPLAN_SIM_STEP_COSTS_H_
#define ZPLAN_SIM_STEP_COSTS_H_

#include <vector>

#include "hardware/profile.h"
#include "models/model.h"
#include "sim/memory_model.h"
#include "sim/ds_config/zero_config.h"

namespace zplan::sim {

// Backward of a fused (flash) attention kernel recomputes the score matrix: 5 matrix products
// per block pair against the forward's 2, i.e. 2.5x its forward FLOPs instead of 2x
// (Dao, FlashAttention-2, 2023, §3.1.2; its FLOP counts use the same factor).
inline constexpr double kFlashBackwardFactor = 2.5;

// Causal self-attention: a fused kernel skips the key blocks the mask hides entirely, executing
// about half of the s x s products (s/2 * (s + block) of s^2; FlashAttention-2's and -3's
// benchmarks count causal FLOPs as half of the full count, Dao 2023 §4.1).
inline constexpr double kCausalFraction = 0.5;

// Eager attention's memory-bound passes over the a*s*s*b scores, in bytes per score element, an
// estimate that counts each kernel's reads and writes once. `upcast`: Hugging Face's
// eager_attention_forward of the Llama family (scale, mask add, softmax with dtype=float32, cast
// back); otherwise GPT-2's _attn (scale, causal where, mask add, softmax in the compute dtype;
// ModelShape::eager_softmax_upcast). `dropout`: the probabilities' dropout pass
// (ModelShape::attention_probs_dropout). The memory model (models/activations.cc) keeps the same
// tensors.
struct EagerSoftmaxBytes {
  double forward = 0;
  double backward = 0;
};
EagerSoftmaxBytes eager_softmax_bytes(int dtype_bytes, bool upcast, bool dropout);

struct Piece {
  int layer = 0;
  int first_op = 0, end_op = 0;  // the layer's ops [first_op, end_op)
  int fetch_module = -1;         // stage 3: the module gathered before this piece runs, or -1
  int fetch_params = 0;          // stage 3: the parameters of fetch_module (its hooks loop over them)
  double fwd_s = 0;
  double bwd_s = 0;
  // Of fwd_s and bwd_s, what the host floor added above the kernels (plan_pieces): time the GPU
  // waited for the Python thread, 0 where the kernels are the longer.
  double fwd_host_s = 0;
  double bwd_host_s = 0;
  double fwd_flops = 0;
  // Backward FLOPs: 2x forward, less the weight gradients of frozen linears (1x for those), 0 for
  // a layer no gradient reaches (Layer::no_grad, then no_grad is set and bwd_s is 0).
  double bwd_flops = 0;
  // Of fwd_flops and bwd_flops, what is executed but no model FLOP (ComputeOp::
  // model_flops_fraction: Llama 4's unpicked expert copies): hardware FLOPs only.
  double fwd_extra_flops = 0;
  double bwd_extra_flops = 0;
  // Host operators its ops issue, forward and backward (one per kernel: a GEMM's backward two,
  // an eager chain its kernels, ComputeOp::kernels), before hooks and fetches (piece_host_ops).
  double fwd_ops = 0;
  double bwd_ops = 0;
  bool no_grad = false;
  // Elements of each parameter whose gradient this piece's backward produces, in the order the
  // gradients appear (reverse of the forward order).
  std::vector<double> grads;
};

// Host operators a piece issues: its ops' (Piece::fwd_ops, bwd_ops: one launch per kernel
// forward, and two per operation backward, the input and the weight gradient or the activation
// gradient, unless an eager chain says how many), plus one Python gradient hook per
// parameter (DeepSpeed's reduce_ready_partitions_and_remove_grads, stage_1_and_2.py; stage 3's
// reduce_partition_and_remove_grads, stage3.py), plus, in stage 3, the module hooks' fetch and
// release of a gathered module before and after each use (stage3_fetch_host_ops).
struct HostOps {
  double fwd = 0, bwd = 0;
  // Stage-3 module fetch-and-release pairs in each pass (1 where the piece gathers its module),
  // priced beyond their operators by hardware::stage3_hook_s.
  double fetch_fwd = 0, fetch_bwd = 0;
};
HostOps piece_host_ops(const Piece& piece, bool stage3);
// Host operators of one stage-3 use of a gathered module with `params` parameters, in the module
// hooks on the Python thread (the same thread that issues the piece's kernels, so they add to
// its host floor). DeepSpeed 0.19, partitioned_param_coordinator.py fetch_sub_module and
// release_sub_module, partition_parameters.py all_gather_coalesced / AllGatherCoalescedHandle.
double stage3_fetch_host_ops(double params);

// The pieces of every layer in forward order. `module_fetch` is ZeroSizes::module_fetch for
// stage 3 (a module needs a gather iff its entry is > 0) and ignored otherwise. Each piece's
// time is its kernels' at the profile's framework efficiency, but never less than the host
// needs to issue them (hardware::host_dispatch_s of piece_host_ops).
std::vector<Piece> plan_pieces(const models::Model& model, const hardware::Profile& profile,
                               const DsConfig& config, const Workload& workload,
                               const ZeroSizes& sizes);

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_STEP_COSTS_H_
