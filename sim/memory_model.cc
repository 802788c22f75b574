// The analytic memory model. Each term names the DeepSpeed 0.19 allocation it stands for; the
// sections of reference/deepspeed_internals.md ("ref §x") give the code lines and arithmetic.
//
// Conventions: p = bytes of the model dtype, a = bytes of the gradient-accumulation dtype,
// Ψ = parameters, P = this rank's partition (ZeroSizes::partition), B = reduce_bucket_size.
// Everything is computed per rank first; host tiers and NVMe are multiplied by the ranks of a node
// at the end, because a profile's host and NVMe capacities are per node.
#include "sim/memory_model.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "sim/swap_buffers.h"
#include "sim/tensor_parallel.h"
#include "sim/zeropp_mics.h"

namespace zplan::sim {

namespace {

using models::LayerKind;

constexpr int kGpu = static_cast<int>(Tier::kGpu);
constexpr int kPinned = static_cast<int>(Tier::kPinnedHost);
constexpr int kHost = static_cast<int>(Tier::kHost);
constexpr int kNvme = static_cast<int>(Tier::kNvme);

// The pinned-or-pageable tier of a host buffer DeepSpeed pins when `pin` is set.
int pin_tier(bool pin) { return pin ? kPinned : kHost; }

// Stage 3: elements gathered at once besides the persistent ones. A fetch gathers the current
// module (transiently twice: the flat all-gather output and the per-parameter torch.cat copy,
// ref §2.2 item 8) and prefetches up to min(prefetch bucket, max_live - available) more.
double gathered_live(const ZeroSizes& s, const ZeroConfig& z, bool backward_start) {
  double max_live = static_cast<double>(z.max_live_parameters);
  double prefetch = std::min(static_cast<double>(z.prefetch_bucket_size),
                             std::max(0.0, max_live - s.largest_fetch));
  double live = 2 * s.largest_fetch + prefetch;
  // When backward starts, the modules reused within max_reuse_distance are still gathered.
  if (backward_start) live += s.reuse_retained;
  return std::min(live, s.non_persistent + s.largest_fetch);
}

// Stage 3 with offload_param.device nvme: the pinned host bytes per rank of the parameter
// swapper's buffers (buffer_count x aligned buffer_size, sim/swap_buffers.h) and, when the
// partition exceeds max_in_cpu so that some sub-group has no flat CPU buffer, the pinned reuse
// buffer stage3.py allocates for swapping updated parameters out after the step
// (_create_fp16_partitions_with_defragmentation -> reserve_partitioned_swap_space): the full,
// unpartitioned numel (ds_numel) of the tensors of the sub-group with the most partition
// elements, in the model dtype. Ref §2.2 "NVMe swap buffers".
double nvme_param_swap_pinned_bytes(const ZeroSizes& s, const DsConfig& config) {
  const OffloadParamConfig& prm = config.zero.offload_param;
  if (config.zero.stage != 3 || prm.device != OffloadDevice::kNvme) return 0;
  double bytes = param_swap_buffer_bytes(config);
  if (s.param_partition > static_cast<double>(prm.max_in_cpu)) {
    bytes += s.param_bytes * s.largest_sub_group_numel;
  }
  return bytes;
}

}  // namespace

ActivationPlan plan_activations(const models::Model& model, const DsConfig& config,
                                const Workload& workload) {
  models::ActivationOptions options;
  options.flash_attention = workload.fused_attention();
  options.fused_loss = workload.fused_loss;
  options.fused_swiglu = workload.fused_swiglu;
  // Liger's patches (use_liger_kernel, apply_liger_kernel_to_llama) replace RMSNorm together
  // with SwiGLU and the loss: --loss liger sets all three.
  options.fused_rmsnorm = workload.fused_swiglu;
  options.loss_upcast = workload.loss_upcast;
  options.dtype_bytes = precision_bytes(config.precision);
  // Ulysses: the rank holds s/sp tokens of each sample (sim/sequence_parallel.h).
  options.sequence_parallel = workload.sequence_parallel;
  const int64_t local_seq = workload.seq_len / options.sequence_parallel;
  const auto& ac = config.activation_checkpointing;
  ActivationPlan plan;
  plan.checkpoints_on_host = ac.enabled && ac.cpu_checkpointing;
  const auto& layers = model.layers();
  const size_t n = layers.size();
  plan.kept.resize(n);
  plan.extra.resize(n);
  plan.stored.resize(n);
  plan.checkpointed.resize(n);
  for (size_t i = 0; i < n; ++i) {
    models::LayerActivations act =
        model.layer_activations(i, local_seq, config.micro_batch, options);
    plan.stored[i] = act.stored_bytes;
    // A layer no gradient reaches is never recomputed (its forward recorded nothing).
    plan.checkpointed[i] = ac.enabled && layers[i].checkpointed_unit && !layers[i].no_grad;
    if (plan.checkpointed[i]) {
      // Full checkpointing keeps the layer input; backward recomputes the layer, so its stored
      // activations exist again while its backward runs (ref §6).
      plan.kept[i] = act.checkpoint_bytes;
      plan.extra[i] = act.stored_bytes + act.workspace_bytes;
    } else {
      plan.kept[i] = act.stored_bytes;
      plan.extra[i] = act.workspace_bytes;
    }
  }
  return plan;
}

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kStep:
      return "step";
    case Phase::kInit:
      return "init";
  }
  return "?";
}

MemoryFit MemoryReport::fit(double headroom) const {
  const TierBytes peak{(*this)[Tier::kGpu].peak_bytes, host_peak_bytes,
                       (*this)[Tier::kNvme].peak_bytes};
  const TierBytes capacity{(*this)[Tier::kGpu].capacity_bytes, (*this)[Tier::kHost].capacity_bytes,
                           (*this)[Tier::kNvme].capacity_bytes};
  return memory_fit(peak, capacity, headroom);
}

std::array<MemoryBreakdown, kNumTiers> persistent_memory(const ZeroSizes& s,
                                                         const hardware::Cluster& cluster,
                                                         const DsConfig& config) {
  const ZeroConfig& z = config.zero;
  const double p = s.param_bytes, a = s.grad_accum_bytes, P = s.partition;
  const auto& opt = z.offload_optimizer;
  const auto& prm = z.offload_param;
  // Bytes of optimizer state per optimized element: the optimizer the "optimizer" block builds
  // (Adam's exp_avg and exp_avg_sq: 8; Lion, Adagrad, SGD with momentum: 4; SGD: 0).
  const double S = config.optimizer.state_bytes();
  // Bytes of a master element and of its gradient in the ZeRO optimizers: 4, or 2 with 16-bit
  // master weights (OptimizerConfig::master_bytes). Stage 0 and BF16_Optimizer keep fp32.
  const double mb = config.optimizer.master_bytes();
  std::array<MemoryBreakdown, kNumTiers> m{};
  MemoryBreakdown& gpu = m[kGpu];
  gpu[Category::kRuntime] = cluster.profile.runtime.cuda_context_bytes +
                            cluster.profile.runtime.nccl_buffer_bytes;
  m[kHost][Category::kRuntime] = cluster.profile.runtime.host_process_bytes;

  if (z.stage == 0) {
    // FP16_Optimizer (fused): 16-bit params, fp32 master and optimizer states, ref §2.3. Training in
    // fp32 has no separate master copy: the optimizer updates the model's own tensors.
    gpu[Category::kParams16] = p * s.psi;
    // Master weights and Adam states of the trainable parameters only: the client optimizer is
    // built over them, and BF16_Optimizer keeps the requires_grad ones of its groups
    // (bf16_optimizer.py _setup_for_real_optimizer).
    if (config.precision != Precision::kFp32) gpu[Category::kMaster32] = 4 * s.train_psi;
    gpu[Category::kOptimizerStates] = S * s.train_psi;
    return m;
  }

  if (z.stage <= 2) {
    // bit16_groups_flat: the trainable parameters, padded (ref §2.1 item 1); frozen ones stay
    // the module's own tensors, replicated on every rank. BF16_Optimizer flattens and pads them
    // the same way (bf16_optimizer.py _setup_for_real_optimizer: nccl_start_alignment_factor 2 x
    // dp).
    gpu[Category::kParams16] = p * (P * s.dp + (s.psi - s.train_psi));
    if (uses_bf16_optimizer(config)) {
      // BF16_Optimizer: the fp32 master partition (fp32_groups_flat_partition), the optimizer's
      // states on it, and fp32_groups_gradients_flat, zeros_like the whole flat 16-bit group in
      // the accumulation dtype: a full-size gradient buffer on every rank, from set-up on.
      gpu[Category::kMaster32] = 4 * P;
      gpu[Category::kOptimizerStates] = S * P;
      gpu[Category::kGrads] = a * P * s.dp;
      return m;
    }
    if (opt.device == OffloadDevice::kNone) {
      gpu[Category::kMaster32] = mb * P;        // single_partition_of_fp32_groups (item 2)
      gpu[Category::kOptimizerStates] = S * P;  // Adam: exp_avg, exp_avg_sq (item 3)
    } else {
      // ZeRO-Offload host buffers (ref §2.1 "with offload_optimizer.device=cpu").
      int pinned = pin_tier(opt.pin_memory);
      m[pinned][Category::kMaster32] = mb * P;
      m[pinned][Category::kGrads32] = mb * P;  // fp32 grad partition
      m[pinned][Category::kParams16] = p * P;  // param_buffer_of_bit16_for_cpu_offload_groups
      m[pinned][Category::kBuckets] = p * s.largest_param;  // temp_grad_buffer_for_cpu_offload
      // accumulated_grads_in_cpu; a 16-bit master accumulates in its own gradient instead
      // (stage_1_and_2.py async_accumulate_grad_in_cpu_via_gpu: a view of it).
      if (config.gradient_accumulation_steps > 1 && !config.optimizer.low_precision_master()) {
        m[pinned][Category::kGrads] = p * P;
      }
      m[kHost][Category::kOptimizerStates] = S * P;  // the CPU optimizer's states, not pinned
    }
    return m;
  }

  // Stage 3 (ref §2.2).
  const double gpu_opt_part = P - s.cpu_partition;
  // 16-bit partitions of all parameters: lp_param_buffer for the trainable ones (item 1), the
  // frozen ones' own ds_tensor partitions (partition_parameters.py), on the same device.
  const double P16 = s.param_partition;
  if (prm.device == OffloadDevice::kNone) {
    gpu[Category::kParams16] = p * P16;
  } else if (prm.device == OffloadDevice::kCpu) {
    m[pin_tier(prm.pin_memory)][Category::kParams16] = p * P16;
  } else {
    // NVMe: max_in_cpu elements stay in pinned flat buffers, the rest is swapped through pinned
    // swap buffers (nvme_param_swap_pinned_bytes), ref §2.2 "NVMe swap buffers".
    double in_cpu = std::min(P16, static_cast<double>(prm.max_in_cpu));
    m[pin_tier(prm.pin_memory)][Category::kParams16] = p * in_cpu;
    m[kNvme][Category::kParams16] = p * (P16 - in_cpu);
    m[kPinned][Category::kSwapBuffers] += nvme_param_swap_pinned_bytes(s, config);
  }
  if (!stage3_master_is_params(config)) gpu[Category::kMaster32] = mb * gpu_opt_part;
  gpu[Category::kOptimizerStates] = S * gpu_opt_part;
  gpu[Category::kBuckets] = p * s.bucket;  // one IPG buffer, not doubled by overlap_comm (item 5)
  gpu[Category::kGatheredParams] = p * s.persistent;
  // ZeRO++ hpZ: every non-persistent parameter's secondary partition, 1/hpz of it in the model
  // dtype, made when a gather is released and kept until step() ends
  // (partition_parameters.py _partition_param_sec, stage3.py invalidate_secondary_tensor).
  // offload_param would put it on the host; that combination is refused.
  if (z.hpz()) {
    gpu[Category::kParams16] +=
        p * s.non_persistent / std::min<double>(z.hpz_partition_size, cluster.gpus);
  }
  if (opt.device == OffloadDevice::kNone) {
    gpu[Category::kGrads] = a * P;  // grad_partitions_flat_buffer (item 6)
  } else {
    int pinned = pin_tier(opt.pin_memory);
    m[pinned][Category::kGrads] = a * P;  // grad_partitions_flat_buffer, pinned on the host
    if (opt.device == OffloadDevice::kCpu) {
      // The master partition is a clone on the host, not pinned (stage3.py
      // _create_fp32_partitions: .to(cpu).clone()); the per-sub-group gradient buffers are
      // pinned with pin_memory (item 7).
      m[kHost][Category::kMaster32] = mb * s.cpu_partition;
      m[pinned][Category::kGrads32] = mb * s.cpu_partition;
      m[kHost][Category::kOptimizerStates] = S * s.cpu_partition;
    } else {
      // NVMe: fp32 params, the states and fp32 grads are swapped (Adam: 16 bytes per element), through
      // buffer_count pinned buffers of the largest sub-group (optimizer_utils.py).
      m[kNvme][Category::kMaster32] = mb * s.cpu_partition;
      m[kNvme][Category::kOptimizerStates] = S * s.cpu_partition;
      m[kNvme][Category::kGrads32] = mb * s.cpu_partition;
      m[kPinned][Category::kSwapBuffers] +=
          4 * static_cast<double>(opt.buffer_count) * s.max_sub_group;
    }
  }
  return m;
}

MemoryReport analyze_memory(const models::Model& model, const hardware::Cluster& cluster,
                            const DsConfig& config, const Workload& workload) {
  // AutoTP: `model` is the rank's shard, partitioned over the data-parallel group.
  assert(model.tensor_parallel() == workload.tensor_parallel);
  return analyze_memory(model, cluster, config, workload,
                        zero_sizes(model, data_parallel_ranks(cluster, workload), config),
                        plan_activations(model, config, workload));
}

MemoryBreakdown init_gpu_memory(const ZeroSizes& s, const hardware::Cluster& cluster,
                                const DsConfig& config, const Workload& workload) {
  MemoryBreakdown m;
  if (config.zero.stage != 3 || workload.zero_init) return m;
  m[Category::kParams16] = s.param_bytes * s.psi;
  m[Category::kRuntime] =
      cluster.profile.runtime.cuda_context_bytes + cluster.profile.runtime.nccl_buffer_bytes;
  return m;
}

namespace {

// The walk analyze_memory takes through one step: a candidate moment of each phase, built on the
// persistent memory, and the phase's peak among them. Per rank; analyze_memory scales host tiers
// and NVMe to the node afterwards.
class PhaseWalk {
 public:
  PhaseWalk(const models::Model& model, const hardware::Cluster& cluster, const DsConfig& config,
            const ZeroSizes& s, const ActivationPlan& acts)
      : config_(config),
        s_(s),
        acts_(acts),
        z_(config.zero),
        base_(persistent_memory(s, cluster, config)),
        p_(s.param_bytes),
        a_(s.grad_accum_bytes),
        P_(s.partition),
        offload_opt_(z_.offload_optimizer.device != OffloadDevice::kNone),
        bf16_optimizer_(uses_bf16_optimizer(config)),
        gas_(config.gradient_accumulation_steps > 1),
        layers_(model.layers()),
        n_layers_(layers_.size()),
        act_tier_(acts.checkpoints_on_host ? kHost : kGpu),
        ckpt_cat_(config.activation_checkpointing.enabled ? Category::kCheckpoints
                                                          : Category::kActivations),
        groups_(zero_groups(z_, cluster)),
        // gathered_live counts ZeRO-3's flat gather output as a second copy of the largest
        // fetch; ZeRO++ qwZ and MiCS hold other transients (gather_transient_bytes).
        gather_adjust_(z_.stage == 3 ? gather_transient_bytes(z_, groups_, p_, s.largest_fetch) -
                                           p_ * s.largest_fetch
                                     : 0) {}

  const std::array<MemoryBreakdown, kNumTiers>& base() const { return base_; }

  // Forward: activations grow layer by layer; stage 3 gathers modules.
  PhaseMemory forward_peak() const;
  // Backward: from the last layer down, activations are released as gradients appear.
  PhaseMemory backward_peak() const;
  // Step: activations are gone; the optimizer's transients appear.
  PhaseMemory step_phase() const;
  // The ZeRO paper's model states on the GPU (MemoryReport::gpu_model_state_bytes).
  double gpu_model_state_bytes() const;

 private:
  PhaseMemory start_phase(Phase ph) const {
    PhaseMemory pm;
    pm.phase = ph;
    pm.tiers = base_;
    return pm;
  }
  // Among candidate moments of a phase, keep the one with the most GPU memory.
  static void keep_max(PhaseMemory& best, const PhaseMemory& cand, bool first) {
    if (first || cand[Tier::kGpu].total() > best[Tier::kGpu].total()) best = cand;
  }
  // Gradients that exist through forward: stage 0/1 accumulate full 16-bit grads in param.grad
  // across micro-steps (ref §2.1 item 7, §2.3); stage 2 keeps the accumulated partition
  // (all_grad_tensors, item 6). Counted for micro-steps after the first.
  void carried_grads(PhaseMemory& pm) const {
    if (!gas_) return;
    if (z_.stage <= 1) pm[Tier::kGpu][Category::kGrads] += p_ * s_.train_psi;
    if (z_.stage == 2 && !offload_opt_) pm[Tier::kGpu][Category::kGrads] += a_ * P_;
  }
  // Checkpoints of checkpointed layers (on the host with cpu_checkpointing) and the stored
  // activations of the others, for layers [0, i).
  void add_kept(PhaseMemory& pm, double ckpt_bytes, double plain_bytes) const {
    pm[static_cast<Tier>(act_tier_)][ckpt_cat_] += ckpt_bytes;
    pm[Tier::kGpu][Category::kActivations] += plain_bytes;
  }
  bool is_ckpt(size_t i) const { return acts_.checkpointed[i]; }
  // The gradients, buckets and gathered parameters of stage z.stage while layer i's backward
  // runs, `grads_done` elements of gradients produced so far (layers >= i).
  void add_backward_terms(MemoryBreakdown& g, size_t i, double layer_numel,
                          double grads_done) const;

  const DsConfig& config_;
  const ZeroSizes& s_;
  const ActivationPlan& acts_;
  const ZeroConfig& z_;
  const std::array<MemoryBreakdown, kNumTiers> base_;
  const double p_, a_, P_;
  const bool offload_opt_;
  const bool bf16_optimizer_;  // stage 1 runs BF16_Optimizer (uses_bf16_optimizer)
  const bool gas_;
  const std::vector<models::Layer>& layers_;
  const size_t n_layers_;
  const int act_tier_;
  const Category ckpt_cat_;
  const ZeroGroups groups_;
  const double gather_adjust_;
};

PhaseMemory PhaseWalk::forward_peak() const {
  const ZeroConfig& z = z_;
  const ZeroSizes& s = s_;
  const ActivationPlan& acts = acts_;
  const double p = p_;
  PhaseMemory best;
  double kept_ckpt = 0, kept_plain = 0;
  for (size_t i = 0; i < n_layers_; ++i) {
    PhaseMemory pm = start_phase(Phase::kForward);
    carried_grads(pm);
    add_kept(pm, kept_ckpt, kept_plain);
    // A checkpointed layer runs its forward without keeping intermediates: they exist only
    // while it runs (extra = stored + workspace); others keep theirs.
    pm[Tier::kGpu][Category::kActivations] +=
        is_ckpt(i) ? acts.extra[i] : acts.kept[i] + acts.extra[i];
    if (z.stage == 3) {
      pm[Tier::kGpu][Category::kGatheredParams] += p * gathered_live(s, z, false) + gather_adjust_;
    }
    keep_max(best, pm, i == 0);
    (is_ckpt(i) ? kept_ckpt : kept_plain) += acts.kept[i];
  }
  return best;
}

PhaseMemory PhaseWalk::backward_peak() const {
  const ActivationPlan& acts = acts_;
  PhaseMemory best;
  double ckpt_below = 0, plain_below = 0;
  for (size_t i = 0; i < n_layers_; ++i) (is_ckpt(i) ? ckpt_below : plain_below) += acts.kept[i];
  double grads_done = 0;  // elements of gradients produced so far (layers >= i)
  for (size_t i = n_layers_; i-- > 0;) {
    (is_ckpt(i) ? ckpt_below : plain_below) -= acts.kept[i];
    // Gradients exist for trainable parameters only.
    double layer_numel = static_cast<double>(layers_[i].trainable_numel());
    grads_done += layer_numel;
    PhaseMemory pm = start_phase(Phase::kBackward);
    MemoryBreakdown& g = pm[Tier::kGpu];
    add_kept(pm, ckpt_below, plain_below);
    // The layer's own stored activations (recomputed under checkpointing) and workspace.
    g[Category::kActivations] += is_ckpt(i) ? acts.extra[i] : acts.kept[i] + acts.extra[i];
    add_backward_terms(g, i, layer_numel, grads_done);
    keep_max(best, pm, i + 1 == n_layers_);
  }
  return best;
}

void PhaseWalk::add_backward_terms(MemoryBreakdown& g, size_t i, double layer_numel,
                                   double grads_done) const {
  const ZeroConfig& z = z_;
  const ZeroSizes& s = s_;
  const double p = p_, a = a_, P = P_;
  const bool gas = gas_, offload_opt = offload_opt_;
  switch (z.stage) {
    case 0:
    case 1: {
      // Full 16-bit grads grow through backward; later micro-steps already hold all of them.
      g[Category::kGrads] += p * (gas ? s.train_psi : grads_done);
      bool reduce_now = z.stage == 0 ? (i == 0) : true;  // stage 1: boundary micro-step
      if (z.stage == 0 && reduce_now) {
        g[Category::kBuckets] += p * std::min(s.train_psi, kStage0AllreduceElems);
      }
      if (z.stage == 1 && bf16_optimizer_) {
        // BF16_Optimizer: after the boundary backward the engine all-reduces the fp32 buffer
        // (buffered_allreduce_fallback on get_grads_for_reduction): allreduce_bucket casts the
        // whole flat buffer to communication_data_type (the training dtype) first, a transient
        // of that size (engine.py allreduce_bucket).
        if (i == 0) g[Category::kBuckets] += p * P * s.dp;
      } else if (z.stage == 1) {
        // The boundary micro-step reduces through the IPG buckets into grads_in_partition.
        if (z.contiguous_gradients) {
          g[Category::kBuckets] += p * s.bucket * (z.overlap_comm ? 2 : 1);
        }
        g[Category::kBuckets] += p * std::min(s.bucket, s.train_psi);  // allreduce flatten temp
        if (offload_opt) {
          g[Category::kBuckets] += p * s.largest_param;  // temp_grad_buffer_for_gpu_offload
        } else {
          g[Category::kGrads] += a * P;  // grads_in_partition
        }
      }
      break;
    }
    case 2: {
      // Gradients of the layer in flight before its hooks copy them into the bucket.
      g[Category::kGrads] += p * layer_numel;
      if (!offload_opt) g[Category::kGrads] += a * P * (gas ? 2 : 1);  // items 6
      if (z.contiguous_gradients) {
        g[Category::kBuckets] += p * s.bucket * (z.overlap_comm ? 2 : 1);
      }
      g[Category::kBuckets] += p * std::min(s.bucket, s.train_psi);  // allreduce flatten temp
      if (offload_opt) g[Category::kBuckets] += p * s.largest_param;
      break;
    }
    case 3: {
      // One module's full 16-bit grads before the hook copies them into the IPG bucket, and
      // the interleaved copy reduce_scatter_coalesced builds (ref §2.2 item 10).
      double largest_module = 0;
      for (const models::Module& m : layers_[i].modules) {
        largest_module = std::max(largest_module, static_cast<double>(m.trainable_numel()));
      }
      g[Category::kGrads] += p * largest_module;
      g[Category::kBuckets] +=
          reduce_transient_bytes(groups_, p, std::min(s.bucket, s.train_psi), s.largest_param);
      g[Category::kGatheredParams] += p * gathered_live(s, z, i + 1 == n_layers_) + gather_adjust_;
      break;
    }
  }
}

PhaseMemory PhaseWalk::step_phase() const {
  const ZeroConfig& z = z_;
  const ZeroSizes& s = s_;
  const double p = p_, a = a_, P = P_;
  PhaseMemory pm = start_phase(Phase::kStep);
  MemoryBreakdown& g = pm[Tier::kGpu];
  // What one GPU update allocates while it runs, per stepped element (torch's foreach Adam).
  const double transient = config_.optimizer.gpu_step_transient_bytes();
  if (z.stage == 0) {
    g[Category::kGrads] += p * s.train_psi;
    // grads_groups_flat: fp32 copy of all gradients (ref §2.3).
    if (config_.precision != Precision::kFp32) g[Category::kGrads32] += 4 * s.train_psi;
    g[Category::kOptimizerStates] += transient * s.train_psi;
  } else if (bf16_optimizer_) {
    // BF16_Optimizer.step(): the gradient partition is a view of the fp32 buffer (no copy); the
    // 16-bit gradients live until zero_grad() after the step.
    g[Category::kGrads] += p * s.train_psi;
    g[Category::kOptimizerStates] += transient * P;
  } else if (z.stage <= 2) {
    if (!offload_opt_) {
      // grads_in_partition + flatten copy + fp32 copy (ref §2.1 item 8).
      g[Category::kGrads] += a * P + p * P;
      g[Category::kGrads32] += master_grad_copy_bytes(config_) * P;
      g[Category::kOptimizerStates] += transient * P;
    }
  } else {
    // Per sub-group on the GPU: a 16-bit flat copy and the fp32 gradient (ref §2.2 item 11).
    if (s.cpu_partition < P) {
      double S = std::min(s.max_sub_group, P - s.cpu_partition);
      g[Category::kGrads] += p * S;
      g[Category::kGrads32] += master_grad_copy_bytes(config_) * S;
      g[Category::kOptimizerStates] += transient * S;
    }
  }
  return pm;
}

double PhaseWalk::gpu_model_state_bytes() const {
  const MemoryBreakdown& g0 = base_[kGpu];
  double bytes = g0[Category::kParams16] + g0[Category::kMaster32] +
                 g0[Category::kOptimizerStates] + g0[Category::kGrads];
  // The steady gradient buffer of stages 0-2 is allocated in backward, not at start.
  if (z_.stage <= 1) bytes += p_ * s_.train_psi;
  if (z_.stage == 2 && !offload_opt_) bytes += a_ * P_;
  return bytes;
}

// Allocator fragmentation on the GPU, as a fraction of what is allocated at each moment; host
// tiers and NVMe from per rank to per node.
void scale_phases(const hardware::Cluster& cluster, MemoryReport* report) {
  const double frag = cluster.profile.runtime.allocator_fragmentation;
  const double ranks_per_node = cluster.gpus_per_node();
  for (PhaseMemory& pm : report->phases) {
    pm[Tier::kGpu].add_fragmentation(frag);
    for (int t : {kPinned, kHost, kNvme}) pm.tiers[t] = pm.tiers[t].scaled(ranks_per_node);
  }
}

// Each tier's peak over the phases (and the GPU's over `init`, init_gpu_memory with
// fragmentation) against its capacity, and the host pool's combined peak.
void summarize_tiers(const hardware::Cluster& cluster, const MemoryBreakdown& init,
                     MemoryReport* report) {
  const auto& prof = cluster.profile;
  const double capacity[kNumTiers] = {prof.gpu.memory_bytes, prof.node.host_memory_bytes,
                                      prof.node.host_memory_bytes, prof.node.nvme_capacity_bytes};
  for (int t = 0; t < kNumTiers; ++t) {
    TierSummary& ts = report->tiers[t];
    ts.capacity_bytes = capacity[t];
    for (int ph = 0; ph < kNumPhases; ++ph) {
      const MemoryBreakdown& b = report->phases[ph].tiers[t];
      if (ph == 0 || b.total() > ts.peak_bytes) {
        ts.peak_bytes = b.total();
        ts.peak_phase = report->phases[ph].phase;
        ts.at_peak = b;
      }
    }
  }
  TierSummary& gpu = report->tiers[kGpu];
  if (init.total() > gpu.peak_bytes) {
    gpu.peak_bytes = init.total();
    gpu.peak_phase = Phase::kInit;
    gpu.at_peak = init;
  }
  for (const PhaseMemory& pm : report->phases) {
    report->host_peak_bytes =
        std::max(report->host_peak_bytes, pm.tiers[kPinned].total() + pm.tiers[kHost].total());
  }
}

}  // namespace

MemoryReport analyze_memory(const models::Model& model, const hardware::Cluster& cluster,
                            const DsConfig& config, const Workload& workload, const ZeroSizes& s,
                            const ActivationPlan& acts) {
  const PhaseWalk walk(model, cluster, config, s, acts);
  MemoryReport report;
  report.phases[0] = walk.forward_peak();
  report.phases[1] = walk.backward_peak();
  report.phases[2] = walk.step_phase();
  scale_phases(cluster, &report);
  MemoryBreakdown init = init_gpu_memory(s, cluster, config, workload);
  init.add_fragmentation(cluster.profile.runtime.allocator_fragmentation);
  summarize_tiers(cluster, init, &report);
  report.gpu_model_state_bytes = walk.gpu_model_state_bytes();
  report.master_dtype = config.optimizer.master_dtype;
  return report;
}

}  // namespace zplan::sim
