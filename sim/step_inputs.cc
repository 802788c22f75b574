#include "sim/step_inputs.h"

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>

#include "sim/memory_model.h"
#include "sim/step_builder.h"

namespace zplan::sim {

namespace {

// One list of fields per struct: a structured binding names every member, so adding a member to
// the struct without adding it here fails to compile. Each calls f on its members in order;
// FieldHasher recurses into the ones that are structs.
template <typename F>
void visit(const LeafModuleConfig& s, F& f) {
  const auto& [classes, names, name_suffixes] = s;
  f(classes), f(names), f(name_suffixes);
}

template <typename F>
void visit(const SizesInputs& s, F& f) {
  const auto& [dp, precision, grad_accum_dtype, stage, reduce_bucket_size, offload_optimizer,
               param_persistence_threshold, model_persistence_threshold, max_reuse_distance,
               sub_group_size, offload_ratio, leaf_module] = s;
  f(dp), f(precision), f(grad_accum_dtype), f(stage), f(reduce_bucket_size), f(offload_optimizer);
  f(param_persistence_threshold), f(model_persistence_threshold), f(max_reuse_distance);
  f(sub_group_size), f(offload_ratio), f(leaf_module);
}

template <typename F>
void visit(const OffloadParamConfig& s, F& f) {
  const auto& [device, nvme_path, buffer_count, buffer_size, max_in_cpu, pin_memory] = s;
  f(device), f(nvme_path), f(buffer_count), f(buffer_size), f(max_in_cpu), f(pin_memory);
}

template <typename F>
void visit(const OffloadOptimizerConfig& s, F& f) {
  const auto& [device, nvme_path, buffer_count, pin_memory, pipeline_read, pipeline_write,
               fast_init, ratio] = s;
  f(device), f(nvme_path), f(buffer_count), f(pin_memory), f(pipeline_read), f(pipeline_write);
  f(fast_init), f(ratio);
}

template <typename F>
void visit(const ZeroConfig& s, F& f) {
  const auto& [stage, contiguous_gradients, reduce_scatter, reduce_bucket_size,
               use_multi_rank_bucket_allreduce, allgather_bucket_size, overlap_comm,
               round_robin_gradients, offload_param, offload_optimizer, sub_group_size,
               prefetch_bucket_size, param_persistence_threshold, model_persistence_threshold,
               max_live_parameters, max_reuse_distance, hpz_partition_size, quantized_weights,
               quantized_gradients, mics_shard_size, mics_hierarchical_params_gather, leaf_module,
               other] = s;
  f(stage), f(contiguous_gradients), f(reduce_scatter), f(reduce_bucket_size);
  f(use_multi_rank_bucket_allreduce), f(allgather_bucket_size), f(overlap_comm);
  f(round_robin_gradients), f(offload_param), f(offload_optimizer), f(sub_group_size);
  f(prefetch_bucket_size), f(param_persistence_threshold), f(model_persistence_threshold);
  f(max_live_parameters), f(max_reuse_distance), f(hpz_partition_size), f(quantized_weights);
  f(quantized_gradients), f(mics_shard_size), f(mics_hierarchical_params_gather), f(leaf_module);
  f(other);
}

template <typename F>
void visit(const ActivationCheckpointingConfig& s, F& f) {
  const auto& [enabled, partition_activations, cpu_checkpointing, contiguous_memory_optimization,
               number_checkpoints, synchronize_checkpoint_boundary, profile] = s;
  f(enabled), f(partition_activations), f(cpu_checkpointing), f(contiguous_memory_optimization);
  f(number_checkpoints), f(synchronize_checkpoint_boundary), f(profile);
}

template <typename F>
void visit(const AioConfig& s, F& f) {
  const auto& [block_size, queue_depth, intra_op_parallelism, single_submit, overlap_events,
               use_gds] = s;
  f(block_size), f(queue_depth), f(intra_op_parallelism), f(single_submit), f(overlap_events);
  f(use_gds);
}

template <typename F>
void visit(const OptimizerConfig& s, F& f) {
  const auto& [name, cpu_name, states, cpu, from_file, master_dtype, state_dtype, cpu_fp32_states,
               gpu_step, weight_decay_pass] = s;
  f(name), f(cpu_name), f(states), f(cpu), f(from_file), f(master_dtype), f(state_dtype);
  f(cpu_fp32_states), f(gpu_step), f(weight_decay_pass);
}

template <typename F>
void visit(const DsConfig& s, F& f) {
  const auto& [zero, train_batch_size, micro_batch, gradient_accumulation_steps, precision,
               grad_accum_dtype, activation_checkpointing, aio, gradient_clipping, optimizer,
               other] = s;
  f(zero), f(train_batch_size), f(micro_batch), f(gradient_accumulation_steps), f(precision);
  f(grad_accum_dtype), f(activation_checkpointing), f(aio), f(gradient_clipping), f(optimizer);
  f(other);
}

template <typename F>
void visit(const Workload& s, F& f) {
  const auto& [seq_len, attention, fused_loss, fused_swiglu, loss_upcast, sequence_parallel,
               tensor_parallel, tp_overlap_comm, zero_init] = s;
  f(seq_len), f(attention), f(fused_loss), f(fused_swiglu), f(loss_upcast);
  f(sequence_parallel), f(tensor_parallel), f(tp_overlap_comm), f(zero_init);
}

template <typename F>
void visit(const StepInputs& s, F& f) {
  const auto& [config, workload] = s;
  f(config), f(workload);
}

// Hashes one leaf field, or recurses into a struct.
struct FieldHasher {
  Fingerprinter h;

  template <typename T>
  void operator()(const T& v) {
    if constexpr (std::is_enum_v<T>) {
      h.add(static_cast<int64_t>(v));
    } else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, int> ||
                         std::is_same_v<T, int64_t> || std::is_same_v<T, double> ||
                         std::is_same_v<T, std::string>) {
      h.add(v);
    } else if constexpr (std::is_same_v<T, std::optional<int64_t>>) {
      h.add(v.has_value());
      h.add(v.value_or(0));
    } else if constexpr (std::is_same_v<T, nlohmann::json>) {
      h.add(v.dump());
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      h.add(static_cast<int64_t>(v.size()));
      for (const std::string& x : v) h.add(x);
    } else {
      visit(v, *this);  // a struct
    }
  }
};

}  // namespace

SizesInputs sizes_inputs(int dp, const DsConfig& config) {
  const ZeroConfig& z = config.zero;
  SizesInputs in;
  // MiCS partitions the states over each shard (mics.py MiCS_Optimizer: partition_count is the
  // shard size), not over every rank.
  in.dp = z.mics() ? static_cast<int>(z.mics_shard_size) : dp;
  in.precision = config.precision;
  in.grad_accum_dtype = config.grad_accum_dtype;
  in.stage = z.stage;
  in.reduce_bucket_size = z.reduce_bucket_size;
  in.offload_optimizer = z.offload_optimizer.device;
  if (z.stage == 3) {
    in.param_persistence_threshold = z.param_persistence_threshold;
    in.model_persistence_threshold = z.model_persistence_threshold;
    in.max_reuse_distance = z.max_reuse_distance;
    in.sub_group_size = z.sub_group_size;
    if (in.offload_optimizer != OffloadDevice::kNone) in.offload_ratio = z.offload_optimizer.ratio;
    in.leaf_module = z.leaf_module;
  }
  return in;
}

StepInputs step_inputs(const DsConfig& config, const Workload& workload, const ZeroSizes& sizes) {
  StepInputs in{config, workload};
  DsConfig& c = in.config;
  c.other = nlohmann::json::object();
  c.zero.other = nlohmann::json::object();
  ZeroConfig& z = c.zero;
  int64_t window = 0;
  if (z.stage == 3) {
    window = std::min(z.prefetch_bucket_size, z.max_live_parameters);
    if (static_cast<double>(window) < StepBuilder::inert_prefetch_window(sizes)) window = 0;
  }
  z.prefetch_bucket_size = window;
  z.max_live_parameters = window;
  // ZeRO++ and MiCS are read by stage 3 only, and their off values are all alike.
  if (!z.hpz()) z.hpz_partition_size = 1;
  if (!z.mics()) z.mics_shard_size = -1;
  if (!z.mics()) z.mics_hierarchical_params_gather = false;
  if (z.stage != 3) z.quantized_weights = z.quantized_gradients = false;
  return in;
}

GraphFingerprint fingerprint(const SizesInputs& inputs) {
  FieldHasher f;
  visit(inputs, f);
  return f.h.finish();
}

GraphFingerprint fingerprint(const StepInputs& inputs) {
  FieldHasher f;
  visit(inputs, f);
  return f.h.finish();
}

}  // namespace zplan::sim
