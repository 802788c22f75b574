// The step-graph builder for every stage. Stage 3's forward and backward are in
// step_builder_stage3.cc, stages 0-2's backward in step_builder_simple.cc; this file holds the
// shared pieces, stages 0-2's forward and the optimizer step.
// "ref §x" = reference/deepspeed_internals.md.
#include "sim/step_builder.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "hardware/cost_model.h"
#include "sim/sequence_parallel.h"
#include "sim/step_builder_internal.h"
#include "sim/tensor_parallel.h"

namespace zplan::sim {

using hardware::Collective;

StepBuilder::StepBuilder(const models::Model& model, const hardware::Cluster& cluster,
                         const DsConfig& config, const Workload& workload, const ZeroSizes* sizes)
    : model_(model),
      cluster_(cluster),
      sizes_(sizes != nullptr ? *sizes
                              : zero_sizes(model, data_parallel_ranks(cluster, workload), config)),
      inputs_(step_inputs(config, workload, sizes_)) {
  // From here on only the normalized inputs: config_ and workload_ refer to inputs_.
  // AutoTP: `model` is one rank's shard, and ZeRO runs over the data-parallel group.
  assert(model.tensor_parallel() == workload_.tensor_parallel);
  dp_ = data_parallel_ranks(cluster, workload_);
  dp_group_ = data_parallel_group(cluster, workload_);
  persistent_ = persistent_memory(sizes_, cluster, config_);
  acts_ = plan_activations(model, config_, workload_);
  pieces_ = plan_pieces(model, cluster.profile, config_, workload_, sizes_);
  layer_first_piece_.assign(model.layers().size() + 1, static_cast<int>(pieces_.size()));
  for (size_t p = pieces_.size(); p-- > 0;)
    layer_first_piece_[pieces_[p].layer] = static_cast<int>(p);
  for (const models::Layer& layer : model.layers()) {
    module_base_.push_back(module_count_);
    module_count_ += static_cast<int>(layer.modules.size());
  }
  // Ulysses: the rank does 1/sp of each sample's work (its s/sp tokens, attention's heads/sp).
  const double sp = workload_.sequence_parallel;
  add_ulysses_all_to_all(pieces_, model, cluster, workload_, config_);
  add_tensor_parallel_all_reduces(pieces_, model, cluster, config_, workload_);
  // AutoTP: the rank's share of the model's FLOPs (its split GEMMs, 1/tp of the replicated ones).
  const double fwd = model.forward_flops_share(workload_.seq_len, config_.micro_batch) / sp;
  // Forward + backward, less the weight-gradient GEMMs frozen linears skip and the backward of
  // layers no gradient reaches (models/finetune.h); 3 x forward when everything trains.
  // Less, too, the work executed but not the model's (Llama 4's unpicked expert copies).
  double skipped = 0, extra = 0;
  for (const Piece& pc : pieces_) {
    skipped += 2 * pc.fwd_flops - pc.bwd_flops;
    extra += pc.fwd_extra_flops + pc.bwd_extra_flops;
  }
  model_flops_ = 3 * fwd - skipped - extra;
  double recomputed = 0;
  for (size_t i = 0; i < model.layers().size(); ++i) {
    if (acts_.checkpointed[i]) {
      recomputed += model.layer_forward_flops(i, workload_.seq_len, config_.micro_batch) / sp;
    }
  }
  // The hardware FLOPs count what the rank runs: with AutoTP, the replicated LM head whole.
  const double run = model.forward_flops(workload_.seq_len, config_.micro_batch) / sp;
  hardware_flops_ = model_flops_ + extra + 3 * (run - fwd) + recomputed;
  ranks_per_node_ = cluster.gpus_per_node();
  for (const models::Layer& layer : model.layers()) {
    for (const auto& module : layer.modules) {
      if (!module.tied_to.empty()) continue;
      for (const models::Param& prm : module.params) param_tensors_ += prm.trainable ? 1 : 0;
    }
  }
  // Roughly: compute and gathers per piece in forward and backward, plus buckets.
  expected_tasks_ = 6 * pieces_.size() + 64;
  groups_ = zero_groups(config_.zero, cluster);
  // AutoTP: ZeRO's world is the data-parallel group (check_tensor_parallel refuses ZeRO++ and
  // MiCS, whose other groups would live inside it).
  if (dp_ != cluster.gpus) groups_.world = groups_.partition = groups_.secondary = dp_group_;
}

std::vector<std::pair<int, int>> StepBuilder::distinct_micro_steps() const {
  const int gas = static_cast<int>(config_.gradient_accumulation_steps);
  const ZeroConfig& z = config_.zero;
  // Stage 3 without optimizer offload does the same in every micro-step: gradients are reduce-
  // scattered and added into a buffer that always exists.
  // Not so with hpZ (the first micro-step's forward gathers across the world, later ones from
  // the secondary partition) or MiCS (the replica all-reduce runs at the boundary only).
  if (z.stage == 3 && z.offload_optimizer.device == OffloadDevice::kNone && !z.hpz() &&
      !z.mics()) {
    return {{gas - 1, gas}};
  }
  if (gas == 1) return {{0, 1}};
  if (gas == 2) return {{0, 1}, {1, 1}};
  // Stages 0 and 1 reduce only at the boundary; the first micro-step runs the same tasks as the
  // middle ones and only allocates the gradients they start with, so its memory peak is no
  // higher: a middle micro-step stands for it too.
  if (z.stage <= 1) return {{1, gas - 1}, {gas - 1, 1}};
  return {{0, 1}, {1, gas - 2}, {gas - 1, 1}};
}

hardware::CollectiveCost StepBuilder::collective(Collective op, double bytes) const {
  for (const CostEntry& e : cost_cache_) {
    if (e.op == op && e.bytes == bytes) return e.cost;
  }
  hardware::CollectiveCost c = dp_ == cluster_.gpus
                                   ? hardware::collective_cost(cluster_, op, bytes)
                                   : group_collective_cost(cluster_, op, bytes, dp_group_);
  cost_cache_.push_back(CostEntry{op, bytes, c});
  return c;
}

Task StepBuilder::collective_task(TaskKind kind, Resource resource, Collective op,
                                  double bytes) const {
  hardware::CollectiveCost c = collective(op, bytes);
  Task t;
  t.kind = kind;
  t.resource = resource;
  t.latency_s = c.latency_s;
  t.work_s = c.transfer_s;
  t.link = c.link == hardware::Link::kNetwork ? LinkSlot::kNetwork : LinkSlot::kIntraNode;
  t.bytes = bytes;
  // Bytes each rank sends, by nccl-tests' bus-bandwidth factors (ref nccl_hardware §2.1).
  const double n = dp_;
  t.wire_bytes = (op == Collective::kAllReduce ? 2.0 : 1.0) * (n - 1) / n * bytes;
  return t;
}

Task StepBuilder::copy_task(TaskKind kind, Resource resource, double bytes) const {
  const hardware::NodeSpec& node = cluster_.profile.node;
  Task t;
  t.kind = kind;
  t.resource = resource;
  t.bytes = bytes;
  switch (kind) {
    case TaskKind::kH2D:
      t.link = LinkSlot::kPcieH2D;
      t.work_s = hardware::h2d_time_s(node, bytes, /*pinned=*/true, ranks_per_node_);
      break;
    case TaskKind::kD2H:
      t.link = LinkSlot::kPcieD2H;
      t.work_s = hardware::d2h_time_s(node, bytes, /*pinned=*/true, ranks_per_node_);
      break;
    case TaskKind::kNvmeRead:
      t.link = LinkSlot::kNvme;
      t.work_s = hardware::nvme_read_time_s(node, bytes, ranks_per_node_);
      break;
    case TaskKind::kNvmeWrite:
      t.link = LinkSlot::kNvme;
      t.work_s = hardware::nvme_write_time_s(node, bytes, ranks_per_node_);
      break;
    default:
      assert(false && "not a copy");
  }
  return t;
}

Task StepBuilder::memory_task(TaskKind kind, Resource resource, double bytes) const {
  Task t;
  t.kind = kind;
  t.resource = resource;
  t.bytes = bytes;
  t.work_s = hardware::memory_bound_time_s(cluster_.profile.gpu, bytes);
  return t;
}

Task StepBuilder::gpu_adam_task(double elems, bool copy_back) const {
  const hardware::GpuSpec& gpu = cluster_.profile.gpu;
  const double p = sizes_.param_bytes;
  if (gpu.arch != hardware::Arch::kCpu) {
    // One bandwidth-bound kernel (gpu_optimizer_bytes); stage 0's FP16_Optimizer also writes the
    // 16-bit copy. Without copy_back at stage 3 the master is the parameters' partition itself
    // (stage3_master_is_params), and the copy_ to itself is a no-op.
    const double copy = copy_back || config_.zero.stage == 0 ? 0 : p;
    return memory_task(TaskKind::kOptimizerGpu, Resource::kCompute,
                       (gpu_optimizer_bytes(config_.optimizer, p) - copy) * elems);
  }
  // A CPU rank as the device (the reference executor, docs/validation.md): its Adam is zplan's
  // vectorized CPU Adam kernel on the rank's one core, at the calibrated CPU Adam rate, then a
  // plain copy of the updated master weights into the model's parameters (read + write).
  Task t;
  t.kind = TaskKind::kOptimizerGpu;
  t.resource = Resource::kCompute;
  t.bytes = (hardware::kAdamBytesPerParam + (copy_back ? 2 * p : 0)) * elems;
  t.work_s = hardware::cpu_adam_time_s(cluster_.profile.node, elems, 1, ranks_per_node_) +
             (copy_back ? hardware::memory_bound_time_s(gpu, 2 * p * elems) : 0);
  return t;
}

TaskId StepBuilder::step_gpu_adam(Ctx& c, double elems, bool copy_back, int index,
                                  TaskId after) const {
  TaskId t = step_task(c, gpu_adam_task(elems, copy_back), index, after);
  // torch's foreach Adam: exp_avg_sq_sqrt = _foreach_sqrt(exp_avg_sqs), a new tensor of the
  // stepped size, freed when _multi_tensor_adam returns.
  const double transient = config_.optimizer.gpu_step_transient_bytes() * elems;
  if (transient > 0) {
    c.g->effect(t, false, Tier::kGpu, Category::kOptimizerStates, transient);
    c.g->effect(t, true, Tier::kGpu, Category::kOptimizerStates, -transient);
  }
  return t;
}

Task StepBuilder::optimizer_checks_task(double elems, double tensors, bool on_host) const {
  const hardware::Profile& prof = cluster_.profile;
  const double a = sizes_.grad_accum_bytes;
  const bool fp16 = config_.precision == Precision::kFp16;
  Task t;
  t.kind = TaskKind::kOptimizerGpu;
  t.resource = Resource::kCompute;
  double bytes = 0, ops = 0;
  if (!on_host) {
    // stage_1_and_2.py has_overflow_partitioned_grads_serial / stage3.py has_overflow, fp16 only
    // (check_grad_overflow): _has_inf_or_nan(g) = g.float(), isnan, isinf, logical_or, .float(),
    // max: reads a and writes 4, 1, 1, 1, 4 bytes, reads 4, 4, 2, 1, 4: a + 26 bytes, 6 operators
    // per tensor.
    if (fp16) {
      bytes += (a + 26) * elems;
      ops += 6 * tensors;
    }
    // get_grad_norm_direct: vector_norm(g.double()) per tensor: a + 8 + 8 bytes, 2 operators.
    bytes += (a + 16) * elems;
    ops += 2 * tensors;
    // unscale_and_clip_grads: mul_ on the master-dtype gradient partition (read and write).
    bytes += 2 * config_.optimizer.master_bytes() * elems;
    ops += 1;
  }
  t.bytes = bytes;
  t.work_s = std::max(hardware::memory_bound_time_s(prof.gpu, bytes),
                      hardware::host_dispatch_s(prof, ops));
  // The overflow flag's all_reduce(MAX) (fp16) and the norm's all_reduce(SUM), each read back
  // with .item(): small collectives, latency only; then the step's fixed host time.
  const double small = collective(hardware::Collective::kAllReduce, 8).total_s();
  t.latency_s = (fp16 ? 2 : 1) * small + hardware::step_overhead_s(prof);
  return t;
}

Task StepBuilder::offload_copy_task(TaskKind kind, double bytes, HostSide side) const {
  const bool pinned =
      side == HostSide::kOffloadBuffer && config_.zero.offload_optimizer.pin_memory;
  const bool h2d = kind == TaskKind::kH2D;
  Task t = copy_task(kind, h2d ? Resource::kH2D : Resource::kD2H, bytes);
  if (pinned || cluster_.profile.gpu.arch == hardware::Arch::kCpu) return t;
  // Pageable: the driver stages it through a pinned bounce buffer while the Python thread waits.
  t.resource = Resource::kCompute;
  t.work_s = hardware::pageable_copy_time_s(cluster_.profile, bytes, h2d, ranks_per_node_);
  return t;
}

bool StepBuilder::stage3_cast_on_host() const {
  return config_.optimizer.master_dtype != config_.precision;
}

double StepBuilder::offload_host_passes_s(double elems) const {
  if (cluster_.profile.gpu.arch == hardware::Arch::kCpu) return 0;
  // unscale_and_clip_grads reads and writes the host gradients (2 x master bytes); the cast or
  // copy of the new master partition into the 16-bit parameters reads it and writes them --
  // except at stage 3 with a master already in the parameters' dtype, whose copy_ to the GPU
  // reads it in place.
  const double mb = config_.optimizer.master_bytes();
  const double cast =
      config_.zero.stage == 3 && !stage3_cast_on_host() ? 0 : mb + sizes_.param_bytes;
  const double bytes = (2 * mb + cast) * elems;
  return hardware::host_pass_time_s(cluster_.profile, bytes, ranks_per_node_);
}

void StepBuilder::build(int micro_step, StepGraph* graph, bool finalize) const {
  graph->clear();
  graph->reserve(expected_tasks_);
  Ctx c;
  c.g = graph;
  c.ms = micro_step;
  c.first = micro_step == 0;
  c.boundary = micro_step + 1 == config_.gradient_accumulation_steps;
  c.ckpt_on_host.assign(model_.layers().size(), kNoTaskId);
  graph->baseline = persistent_;
  graph->comm_compute_slowdown = cluster_.profile.gpu.comm_compute_slowdown;
  // Gradients carried from the micro-steps before this one (ref §2.1 items 6-7, §2.3).
  const double p = sizes_.param_bytes;
  const bool offload = config_.zero.offload_optimizer.device != OffloadDevice::kNone;
  if (!c.first) {
    if (config_.zero.stage <= 1) {
      graph->baseline[static_cast<int>(Tier::kGpu)][Category::kGrads] += p * sizes_.train_psi;
    } else if (config_.zero.stage == 2 && !offload) {
      graph->baseline[static_cast<int>(Tier::kGpu)][Category::kGrads] +=
          sizes_.grad_accum_bytes * sizes_.partition;
    }
  }
  if (config_.zero.stage == 3) {
    build_stage3(c);
  } else {
    build_forward_simple(c);
    build_backward_simple(c);
  }
  if (finalize) graph->finalize();
}

void StepBuilder::build_optimizer_step(const std::array<MemoryBreakdown, kNumTiers>& start_memory,
                                       StepGraph* graph, bool finalize) const {
  graph->clear();
  Ctx c;
  c.g = graph;
  c.ms = -1;
  c.boundary = true;
  graph->baseline = start_memory;
  graph->comm_compute_slowdown = cluster_.profile.gpu.comm_compute_slowdown;
  build_optimizer(c);
  if (finalize) graph->finalize();
}

// --- Activations, shared by every stage -------------------------------------------------------

void StepBuilder::add_forward_memory(Ctx& c, TaskId t, int layer, bool recompute) const {
  // Forward of a layer: keeps `kept` until its backward (on the host with cpu_checkpointing,
  // after a copy), and holds `extra` while it runs. A recompute rebuilds the stored activations
  // for the backward that follows.
  const size_t l = static_cast<size_t>(layer);
  const Tier gpu = Tier::kGpu;
  if (recompute) {
    c.g->effect(t, false, gpu, Category::kActivations, acts_.stored[l]);
    return;
  }
  Category kept_cat = acts_.checkpointed[l] ? Category::kCheckpoints : Category::kActivations;
  c.g->effect(t, false, gpu, kept_cat, acts_.kept[l]);
  c.g->effect(t, false, gpu, Category::kActivations, acts_.extra[l]);
  c.g->effect(t, true, gpu, Category::kActivations, -acts_.extra[l]);
  if (acts_.checkpointed[l] && acts_.checkpoints_on_host && acts_.kept[l] > 0) {
    // cpu_checkpointing: the checkpoint moves to host memory (ref §6).
    TaskId d2h = place(c, copy_task(TaskKind::kD2H, Resource::kD2H, acts_.kept[l]), layer, -1, t);
    c.g->effect(d2h, false, Tier::kHost, Category::kCheckpoints, acts_.kept[l]);
    c.g->effect(d2h, true, gpu, Category::kCheckpoints, -acts_.kept[l]);
    c.ckpt_on_host[l] = d2h;
  }
}

TaskId StepBuilder::add_recompute(Ctx& c, int layer, TaskId after_compute) const {
  // Checkpointed layer: bring the checkpoint back (cpu_checkpointing) and recompute the forward.
  const size_t l = static_cast<size_t>(layer);
  TaskId h2d = kNoTaskId;
  if (c.ckpt_on_host[l] != kNoTaskId) {
    h2d = place(c, copy_task(TaskKind::kH2D, Resource::kH2D, acts_.kept[l]), layer, -1,
                c.ckpt_on_host[l]);
    if (after_compute != kNoTaskId) c.g->depend(h2d, after_compute);
    c.g->effect(h2d, false, Tier::kGpu, Category::kCheckpoints, acts_.kept[l]);
    c.g->effect(h2d, true, Tier::kHost, Category::kCheckpoints, -acts_.kept[l]);
  }
  return h2d;
}

void StepBuilder::add_backward_memory(Ctx& c, TaskId t, int layer, bool last_piece_of_layer) const {
  // Workspace while the backward runs; at the end of the layer's last backward piece its stored
  // (or recomputed) activations and its checkpoint are released.
  const size_t l = static_cast<size_t>(layer);
  const Tier gpu = Tier::kGpu;
  double workspace = acts_.checkpointed[l] ? acts_.extra[l] - acts_.stored[l] : acts_.extra[l];
  c.g->effect(t, false, gpu, Category::kActivations, workspace);
  c.g->effect(t, true, gpu, Category::kActivations, -workspace);
  if (!last_piece_of_layer) return;
  if (acts_.checkpointed[l]) {
    c.g->effect(t, true, gpu, Category::kActivations, -acts_.stored[l]);
    c.g->effect(t, true, gpu, Category::kCheckpoints, -acts_.kept[l]);
  } else {
    c.g->effect(t, true, gpu, Category::kActivations, -acts_.kept[l]);
  }
}

TaskId StepBuilder::place(Ctx& c, Task t, int layer, int index, TaskId after) const {
  t.micro_step = static_cast<int16_t>(c.ms);
  t.layer = layer;
  t.index = index;
  TaskId id = c.g->add(t);
  if (after != kNoTaskId) c.g->depend(id, after);
  return id;
}

TaskId StepBuilder::add_compute(Ctx& c, TaskKind kind, int piece) const {
  const Piece& pc = pieces_[piece];
  // Each layer's forward, recompute and backward repeat from layer to layer: tell the graph
  // where one starts (StepGraph::hint_repeat).
  const int key = pc.layer * kNumTaskKinds + static_cast<int>(kind);
  if (key != c.repeat_key) {
    c.repeat_key = key;
    c.g->hint_repeat();
  }
  Task t;
  t.kind = kind;
  t.resource = Resource::kCompute;
  t.micro_step = static_cast<int16_t>(c.ms);
  t.layer = pc.layer;
  t.index = piece;
  t.work_s = kind == TaskKind::kBackward ? pc.bwd_s : pc.fwd_s;
  t.host_s = kind == TaskKind::kBackward ? pc.bwd_host_s : pc.fwd_host_s;
  t.flops = kind == TaskKind::kBackward ? pc.bwd_flops : pc.fwd_flops;
  if (kind == TaskKind::kBackward && config_.zero.stage >= 2) {
    // Stages 2-3: the gradient hooks copy the piece's new gradients into the IPG buffer
    // (reduce_ready_partitions_and_remove_grads / __add_grad_to_ipg_bucket, ref §2.1 item 4,
    // §2.2 item 10), a read and a write on the compute stream.
    double grads = 0;
    for (double e : pc.grads) grads += e;
    t.work_s += hardware::memory_bound_time_s(cluster_.profile.gpu, 2 * sizes_.param_bytes * grads);
  }
  return c.g->add(t);
}

// --- Stages 0-2 ----------------------------------------------------------------------------

void StepBuilder::build_forward_simple(Ctx& c) const {
  for (size_t p = 0; p < pieces_.size(); ++p) {
    TaskId f = add_compute(c, TaskKind::kForward, static_cast<int>(p));
    add_forward_memory(c, f, pieces_[p].layer, /*recompute=*/false);
  }
}

// --- The optimizer step ----------------------------------------------------------------------

void StepBuilder::build_optimizer(Ctx& c) const {
  // The step starts after the last micro-step's synchronization: every reduction and gradient
  // copy has ended, so nothing here waits on them.
  if (config_.zero.stage == 0) {
    optimizer_stage0(c);
  } else if (uses_bf16_optimizer(config_)) {
    optimizer_bf16(c);
  } else if (config_.zero.stage <= 2) {
    optimizer_stages12(c);
  } else {
    optimizer_stage3(c);
  }
}

TaskId StepBuilder::step_task(Ctx& c, const Task& t, int index, TaskId after) const {
  return place(c, t, -1, index, after);
}

void StepBuilder::optimizer_stage0(Ctx& c) const {
  const double p = sizes_.param_bytes;
  const Tier gpu = Tier::kGpu;
  // FP16_Optimizer: fp32 copy of the flat gradients, fused Adam, 16-bit copy back (ref §2.3).
  // Over the trainable parameters only (frozen ones have no gradient and no optimizer state).
  TaskId ot = step_gpu_adam(c, sizes_.train_psi, /*copy_back=*/false);
  if (config_.precision != Precision::kFp32) {
    c.g->effect(ot, false, gpu, Category::kGrads32, 4 * sizes_.train_psi);
    c.g->effect(ot, true, gpu, Category::kGrads32, -4 * sizes_.train_psi);
  }
  // zero_grad(set_to_none): the gradients are gone after the step.
  c.g->effect(ot, true, gpu, Category::kGrads, -p * sizes_.train_psi);
}

void StepBuilder::optimizer_stages12(Ctx& c) const {
  const ZeroConfig& z = config_.zero;
  const double p = sizes_.param_bytes;
  const double a = sizes_.grad_accum_bytes;
  const double P = sizes_.partition;
  const Tier gpu = Tier::kGpu;
  const bool offload = z.offload_optimizer.device != OffloadDevice::kNone;
  // The framework terms (docs/cost_model.md §14) are DeepSpeed's; a cpu device runs zplan's own
  // executor, which has none of them.
  const bool framework_terms = cluster_.profile.gpu.arch != hardware::Arch::kCpu;
  TaskId last;
  if (!offload) {
    // Flatten the partition's gradients, cast to fp32, Adam, copy back to 16-bit (ref §2.1
    // item 8).
    // A master gradient in the accumulation dtype is the flat copy itself
    // (master_grad_copy_bytes is 0).
    const double mb = master_grad_copy_bytes(config_);
    Task prep = memory_task(TaskKind::kOptimizerGpu, Resource::kCompute, (a + p + p + mb) * P);
    TaskId pt = step_task(c, prep);
    // Partition slices of ~1/dp of the tensors (at least one) in averaged_gradients.
    const double tensors = std::max(1.0, param_tensors_ / dp_);
    if (framework_terms) {
      step_task(c, optimizer_checks_task(P, tensors, /*on_host=*/false), -1, pt);
    }
    c.g->effect(pt, false, gpu, Category::kGrads, p * P);
    c.g->effect(pt, false, gpu, Category::kGrads32, mb * P);
    // The flat copy is freed once cast, or kept as the master gradient when it is one.
    const bool alias = master_grads_alias_grads(config_);
    if (!alias) c.g->effect(pt, true, gpu, Category::kGrads, -p * P);
    last = step_gpu_adam(c, P, /*copy_back=*/true);
    if (alias) c.g->effect(last, true, gpu, Category::kGrads, -p * P);
    c.g->effect(last, true, gpu, Category::kGrads32, -mb * P);
    c.g->effect(last, true, gpu, Category::kGrads, -a * P);  // grads_in_partition
  } else {
    // ZeRO-Offload: CPU Adam over the partition, then the 16-bit partition back to the GPU.
    // The norm was taken on the GPU in backward; unscale_and_clip_grads runs on the fp32 host
    // grads before the CPU Adam, and step() casts the new fp32 partition into the 16-bit host
    // buffer (param_buffer_of_bit16_for_cpu_offload_groups, pinned with pin_memory) before the
    // non_blocking copy to the GPU (stage_1_and_2.py step(); offload_host_passes_s).
    TaskId ct = framework_terms ? step_task(c, optimizer_checks_task(P, 1, /*on_host=*/true))
                                : kNoTaskId;
    Task adam;
    adam.kind = TaskKind::kOptimizerCpu;
    adam.resource = Resource::kCpuOptimizer;
    adam.work_s = hardware::offload_cpu_adam_time_s(cluster_.profile, P, ranks_per_node_,
                                                    config_.optimizer.step_bytes()) +
                  offload_host_passes_s(P);
    TaskId at = step_task(c, adam, -1, ct);
    last = step_task(c, offload_copy_task(TaskKind::kH2D, p * P), -1, at);
  }
  // Stage 1 frees the full gradients in step() (ref §2.1 item 7).
  if (z.stage == 1) c.g->effect(last, true, gpu, Category::kGrads, -p * sizes_.train_psi);
  // all_gather_dp_groups rebuilds the 16-bit parameters, on the compute stream.
  step_task(c, collective_task(TaskKind::kAllGather, Resource::kCompute, Collective::kAllGather,
                            p * P * dp_),
            -1, last);
}

void StepBuilder::optimizer_bf16(Ctx& c) const {
  // BF16_Optimizer.step() (runtime/bf16_optimizer.py): the global norm of the full fp32 gradient
  // buffer and the clip (priced as the ZeRO optimizer's norm and unscale, over the whole buffer:
  // every rank holds the all-reduced gradients); the wrapped optimizer over this rank's fp32
  // partition, whose gradient is a view of the buffer; update_lp_params copies the partition
  // into the 16-bit flat group (the optimizer task's 16-bit write) and all_gather_dp_groups
  // rebuilds the rest; clear_hp_grads zeroes the buffer; zero_grad() drops the 16-bit gradients.
  const double p = sizes_.param_bytes;
  const double a = sizes_.grad_accum_bytes;
  const double P = sizes_.partition;
  const double flat = P * cluster_.gpus;
  const Tier gpu = Tier::kGpu;
  TaskId ct = kNoTaskId;
  if (cluster_.profile.gpu.arch != hardware::Arch::kCpu) {
    ct = step_task(c, optimizer_checks_task(flat, param_tensors_, /*on_host=*/false));
  }
  TaskId at = step_gpu_adam(c, P, /*copy_back=*/true, -1, ct);
  TaskId gt = step_task(c, collective_task(TaskKind::kAllGather, Resource::kCompute,
                                           Collective::kAllGather, p * flat),
                        -1, at);
  TaskId zt = step_task(c, memory_task(TaskKind::kOptimizerGpu, Resource::kCompute, a * flat), -1,
                        gt);
  c.g->effect(zt, true, gpu, Category::kGrads, -p * sizes_.train_psi);
}

void StepBuilder::optimizer_stage3(Ctx& c) const {
  const ZeroConfig& z = config_.zero;
  const double p = sizes_.param_bytes;
  const double a = sizes_.grad_accum_bytes;
  const Tier gpu = Tier::kGpu;
  const bool offload = z.offload_optimizer.device != OffloadDevice::kNone;
  // Stage 3: per sub-group (ref §2.2 item 11, §5.2).
  const auto& opt = z.offload_optimizer;
  const bool params_on_gpu = z.offload_param.device == OffloadDevice::kNone;
  const bool nvme = opt.device == OffloadDevice::kNvme;
  const bool nvme_params = z.offload_param.device == OffloadDevice::kNvme;
  const int groups = sizes_.sub_groups;
  const int first_cpu = offload ? static_cast<int>((1 - opt.ratio) * groups) : groups;
  TaskId prev_read = kNoTaskId, prev_write = kNoTaskId, prev_copy = kNoTaskId;
  TaskId last = kNoTaskId;
  // stage3.py step(): overflow check and norm over the flat gradient partitions (one tensor per
  // sub-group), unscale_and_clip_grads per sub-group; with offload the norms were taken on the
  // GPU at the boundary and the unscale runs on the host grads (priced with the CPU Adam below).
  const bool framework_terms = cluster_.profile.gpu.arch != hardware::Arch::kCpu;
  const double gpu_part = sizes_.partition - (offload ? sizes_.cpu_partition : 0);
  if (framework_terms) {
    step_task(c, optimizer_checks_task(gpu_part, groups, /*on_host=*/!(gpu_part > 0)), -1);
  }
  // The master-dtype gradient copy, none when it is the flat copy.
  const double mb = master_grad_copy_bytes(config_);
  const bool copy_back = !stage3_master_is_params(config_);
  for (int g = 0; g < groups; ++g) {
    const double S = sizes_.sub_group_sizes[g];
    if (g < first_cpu) {
      TaskId pt = step_task(c,
          memory_task(TaskKind::kOptimizerGpu, Resource::kCompute, (a + p + p + mb) * S), g);
      c.g->effect(pt, false, gpu, Category::kGrads, p * S);
      c.g->effect(pt, false, gpu, Category::kGrads32, mb * S);
      TaskId at = step_gpu_adam(c, S, copy_back, g);
      c.g->effect(at, true, gpu, Category::kGrads, -p * S);
      c.g->effect(at, true, gpu, Category::kGrads32, -mb * S);
      last = at;
      continue;
    }
    TaskId read = kNoTaskId;
    if (nvme) {
      // Swap in fp32 params, the optimizer states and gradients (Adam: 16 bytes per element).
      read = step_task(c, copy_task(TaskKind::kNvmeRead, Resource::kNvmeRead,
                                    config_.optimizer.nvme_in_bytes() * S), g);
      // Without pipeline_read the next swap-in starts after this sub-group is written back.
      if (!opt.pipeline_read && prev_write != kNoTaskId) c.g->depend(read, prev_write);
      if (opt.pipeline_read && prev_read != kNoTaskId) c.g->depend(read, prev_read);
      prev_read = read;
    }
    Task adam;
    adam.kind = TaskKind::kOptimizerCpu;
    adam.resource = Resource::kCpuOptimizer;
    adam.work_s = hardware::offload_cpu_adam_time_s(cluster_.profile, S, ranks_per_node_,
                                                    config_.optimizer.step_bytes()) +
                  offload_host_passes_s(S);
    TaskId at = step_task(c, adam, g, read);
    // Without pipeline_write, a sub-group's update waits for the previous write-back.
    if (nvme && !opt.pipeline_write && prev_write != kNoTaskId) c.g->depend(at, prev_write);
    // step() walks the sub-groups on one Python thread, and the copy of the new 16-bit
    // parameters to the GPU below is a blocking copy_: the next sub-group's update starts after
    // it returns.
    if (prev_copy != kNoTaskId) c.g->depend(at, prev_copy);
    last = at;
    if (nvme) {
      prev_write = step_task(c, copy_task(TaskKind::kNvmeWrite, Resource::kNvmeWrite,
                                          config_.optimizer.nvme_out_bytes() * S),
                             g, at);
      last = prev_write;
    }
    if (params_on_gpu) {
      // _reassign_or_swap_out_partitioned_parameters: fp16_partitioned_groups_flat[i].data.copy_(
      // fp32 partition), a blocking copy across devices and dtypes. PyTorch converts on the CPU
      // (the cast of offload_host_passes_s) into a new pageable tensor and copies that to the
      // GPU. A master partition already in the parameters' dtype is copied from where it lies,
      // which is pageable too (a clone, never pinned: stage3.py _create_fp32_partitions). So
      // the copy is pageable whatever pin_memory says.
      last = step_task(c, offload_copy_task(TaskKind::kH2D, p * S, HostSide::kPageableTemporary),
                       g, at);
      prev_copy = last;
    } else if (nvme_params) {
      // The updated 16-bit partition is swapped back out.
      last = step_task(c, copy_task(TaskKind::kNvmeWrite, Resource::kNvmeWrite, p * S), g, at);
    }
  }
  // _post_step: persistent parameters are gathered again (ref §2.2 item 9).
  if (sizes_.persistent > 0 && dp_ > 1) {
    Resource stream = z.overlap_comm ? Resource::kGatherStream : Resource::kCompute;
    // Over the partition group: the MiCS shard's (mics.py MiCS_Init attaches it to every
    // parameter), else every rank.
    step_task(c,
              z.mics() ? group_task(TaskKind::kAllGather, stream, Collective::kAllGather,
                                    p * sizes_.persistent, CommGroupId::kPartition)
                       : collective_task(TaskKind::kAllGather, stream, Collective::kAllGather,
                                         p * sizes_.persistent),
              -1, last);
  }
}

}  // namespace zplan::sim
