// DsConfig: a DeepSpeed ds_config.json as DeepSpeed 0.19 reads it, and zplan's run options.
//
// Defaults, "auto" handling, batch-size relations and what is rejected follow DeepSpeed's own
// source (reference/deepspeed_internals.md §1): zero_optimization and its offload blocks are
// pydantic models with extra="forbid" (an unknown key is an error), "auto" means "the default"
// to DeepSpeed and "filled in by the Hugging Face Trainer" to users, so zplan fills it the way the
// Trainer does. Sizes are in elements, as DeepSpeed counts them.
#ifndef ZPLAN_SIM_ZERO_CONFIG_H_
#define ZPLAN_SIM_ZERO_CONFIG_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zplan::sim {

// The largest train_micro_batch_size_per_gpu and gradient_accumulation_steps zplan accepts.
inline constexpr int64_t kMaxBatchCount = 1'000'000;

enum class Precision { kFp16, kBf16, kFp32 };
enum class OffloadDevice { kNone, kCpu, kNvme };

const char* precision_name(Precision p);           // "fp16", "bf16", "fp32"
const char* offload_device_name(OffloadDevice d);  // "none", "cpu", "nvme"
int precision_bytes(Precision p);                  // 2, 2, 4

// zero_optimization.offload_param (DeepSpeedZeroOffloadParamConfig; stage 3 only).
struct OffloadParamConfig {
  OffloadDevice device = OffloadDevice::kNone;
  std::string nvme_path;
  int64_t buffer_count = 5;
  int64_t buffer_size = 100'000'000;   // elements per buffer
  int64_t max_in_cpu = 1'000'000'000;  // elements kept in pinned host memory with device=nvme
  bool pin_memory = true;              // default True since DeepSpeed 0.19.5
};

// zero_optimization.offload_optimizer (DeepSpeedZeroOffloadOptimizerConfig).
struct OffloadOptimizerConfig {
  OffloadDevice device = OffloadDevice::kNone;
  std::string nvme_path;
  int64_t buffer_count = 4;
  bool pin_memory = true;
  bool pipeline_read = false;
  bool pipeline_write = false;
  bool fast_init = false;
  double ratio = 1.0;  // fraction of sub-groups updated on the CPU (< 1 needs stage 3)
};

// zero_optimization.leaf_module (DeepSpeedZeroLeafModuleConfig, runtime/zero/leaf_module_config.py;
// DeepSpeed >= 0.18.0, PR #7604): the modules ZeRO-3 treats as leaves -- hooks only on them, their
// whole subtree gathered at once -- by class (its name or fully qualified name), by module name
// (model.named_modules()) or by name suffix, applied by the engine before the hooks are installed
// (engine.py _configure_distributed_model -> utils/z3_leaf_module.py
// apply_zero_leaf_module_config). A string is read as a list of one; entries are de-duplicated.
// Default: Hugging Face's Mixtral, Qwen2-MoE and Qwen3-MoE sparse blocks.
std::vector<std::string> default_leaf_module_classes();
struct LeafModuleConfig {
  std::vector<std::string> classes = default_leaf_module_classes();
  std::vector<std::string> names;
  std::vector<std::string> name_suffixes;
  bool operator==(const LeafModuleConfig& o) const {
    return classes == o.classes && names == o.names && name_suffixes == o.name_suffixes;
  }
  bool is_default() const { return *this == LeafModuleConfig{}; }
};

// Top-level "aio" block (swap_tensor/aio_config.py; `thread_count` is ignored since 0.17).
struct AioConfig {
  int64_t block_size = 1'048'576;
  int64_t queue_depth = 8;
  int64_t intra_op_parallelism = 1;
  bool single_submit = false;
  bool overlap_events = true;
  bool use_gds = false;
};

// Top-level "activation_checkpointing" block. DeepSpeed only configures checkpointing here; the
// model must call it. zplan treats the block's presence as "the model checkpoints every layer"
// (`enabled`), which the --checkpointing flag can override.
struct ActivationCheckpointingConfig {
  bool enabled = false;
  bool partition_activations = false;
  bool cpu_checkpointing = false;
  bool contiguous_memory_optimization = false;
  std::optional<int64_t> number_checkpoints;
  bool synchronize_checkpoint_boundary = false;
  bool profile = false;
};

// The optimizer DeepSpeed 0.19 builds from the ds_config's "optimizer" block (engine.py
// _configure_basic_optimizer), as memory and step time see it: how many fp32 tensors of the
// partition's size it keeps, and which CPU optimizer steps it under optimizer offload. A file
// without the block leaves the optimizer to the training script; zplan then assumes AdamW, the
// Hugging Face Trainer's default, as the planner's written files say.
enum class CpuOptimizer {
  kNone,       // the class DeepSpeed builds has no CPU kernel zplan times: refused with offload
  kAdam,       // DeepSpeedCPUAdam (csrc/adam/cpu_adam_impl.cpp)
  kLion,       // DeepSpeedCPULion (csrc/lion/cpu_lion_impl.cpp)
  kAdagrad,    // DeepSpeedCPUAdagrad (csrc/adagrad/cpu_adagrad.cpp)
};
// How the GPU step runs Adam's update on the stepped partition.
enum class GpuStep {
  // One kernel over the tensors (DeepSpeed's FusedAdam, csrc/adam/multi_tensor_adam.cu; torch's
  // fused=True, the Hugging Face Trainer's adamw_torch_fused).
  kFused,
  // torch.optim.Adam/AdamW without fused=True on CUDA tensors: _default_to_fused_or_foreach picks
  // the foreach path (torch/optim/adam.py _multi_tensor_adam), a kernel per operation of the
  // update, each a pass over the tensors, and _foreach_sqrt allocates the denominator as a new
  // tensor of the stepped size (the Trainer's adamw_torch; the for-loop path, foreach=False, and
  // transformers' own AdamW, adamw_hf, make the same passes).
  kForeach,
};

struct OptimizerConfig {
  // The class DeepSpeed builds, for messages and the text output ("FusedAdam", "FusedLion",
  // "torch.optim.SGD", ...); under optimizer offload the CPU class instead.
  std::string name = "FusedAdam";
  std::string cpu_name = "DeepSpeedCPUAdam";
  // fp32 state tensors of the optimized partition's size (Adam's exp_avg and exp_avg_sq: 2; Lion's
  // exp_avg, Adagrad's sum, SGD's momentum_buffer: 1; SGD without momentum: 0).
  int states = 2;
  CpuOptimizer cpu = CpuOptimizer::kAdam;
  // The file's block gave it (else the script's optimizer, assumed AdamW).
  bool from_file = false;
  // The dtype of the ZeRO optimizer's master partition and of its gradient: fp32, or the flag's
  // 16-bit dtype with bf16_master_weights_and_grads / fp16_master_weights_and_grads
  // (base_optimizer.py _configure_master_weights: master_weights_and_grads_dtype). It need not be
  // the training dtype: the flags are read from their block whether or not it is enabled.
  Precision master_dtype = Precision::kFp32;
  // The dtype of each optimizer state: fp32, or the master's 16-bit dtype with
  // bf16_optimizer_states, or with DeepSpeedCPUAdam's fp32_optimizer_states false (cpu_adam.py:
  // the states take the dtype of the parameter it steps, the master partition).
  Precision state_dtype = Precision::kFp32;
  // The optimizer block's params.fp32_optimizer_states (DeepSpeedCPUAdam's; default true).
  bool cpu_fp32_states = true;
  // The GPU update's kernels, and whether the foreach path makes its weight-decay pass
  // (_multi_tensor_adam: torch._foreach_mul_ of the parameters when weight_decay != 0).
  GpuStep gpu_step = GpuStep::kFused;
  bool weight_decay_pass = false;

  double master_bytes() const { return precision_bytes(master_dtype); }
  double state_elem_bytes() const { return precision_bytes(state_dtype); }
  bool is_adam() const { return states == 2 && cpu == CpuOptimizer::kAdam; }
  bool low_precision_master() const { return master_dtype != Precision::kFp32; }
  // Bytes of state per optimized element.
  double state_bytes() const { return state_elem_bytes() * states; }
  // Bytes one step moves per optimized element: reads the master parameter, its gradient and
  // every state, writes the parameter and every state (fp32 Adam: 16 + 12 = 28, reference §6).
  double step_bytes() const { return 3 * master_bytes() + 2 * state_bytes(); }
  // Bytes per stepped element of the GPU update: step_bytes() in one fused kernel, or the
  // foreach path's passes (fp32 Adam: 72, 80 with weight decay).
  double gpu_step_bytes() const;
  // Bytes per stepped element allocated for the length of one GPU update: the foreach path's
  // exp_avg_sq_sqrt, in the states' dtype; 0 for a fused kernel.
  double gpu_step_transient_bytes() const {
    return gpu_step == GpuStep::kForeach ? state_elem_bytes() : 0;
  }
  // Bytes an NVMe optimizer swap moves per element: the fp32 parameter, the states and the fp32
  // gradient in (Adam: 16), the parameter and the states out (Adam: 12) (stage3.py
  // _optimizer_states_and_gradient_swap_in/_out).
  double nvme_in_bytes() const { return 2 * master_bytes() + state_bytes(); }
  double nvme_out_bytes() const { return master_bytes() + state_bytes(); }
};

struct ZeroConfig {
  int stage = 0;
  bool contiguous_gradients = true;
  bool reduce_scatter = true;
  int64_t reduce_bucket_size = 500'000'000;
  bool use_multi_rank_bucket_allreduce = true;
  int64_t allgather_bucket_size = 500'000'000;
  bool overlap_comm = false;  // resolved: DeepSpeed's default is true iff stage == 3
  bool round_robin_gradients = false;
  OffloadParamConfig offload_param;
  OffloadOptimizerConfig offload_optimizer;
  int64_t sub_group_size = 1'000'000'000;
  int64_t prefetch_bucket_size = 50'000'000;      // stage3_prefetch_bucket_size
  int64_t param_persistence_threshold = 100'000;  // stage3_param_persistence_threshold
  int64_t model_persistence_threshold = std::numeric_limits<int64_t>::max();
  int64_t max_live_parameters = 1'000'000'000;  // stage3_max_live_parameters
  int64_t max_reuse_distance = 1'000'000'000;   // stage3_max_reuse_distance
  // ZeRO++ and MiCS, read by stage 3 only (ignored at stages 0-2, as DeepSpeed does).
  // zero_hpz_partition_size: ranks of each hpZ group (consecutive ranks, groups.py
  // _create_zero_param_parallel_group); > 1 keeps a secondary 16-bit partition of 1/hpz of every
  // parameter on each rank, made after the forward gather, so that backward gathers inside the
  // group (partition_parameters.py _partition_param_sec). 0 and 1 mean off.
  int64_t hpz_partition_size = 1;
  // zero_quantized_weights (qwZ): parameter all-gathers move block-quantized int8 plus fp32
  // scales (partition_parameters.py _all_gather_coalesced, CUDAQuantizer).
  bool quantized_weights = false;
  // zero_quantized_gradients (qgZ): on more than one node, gradients are reduced by two int4
  // all-to-alls, intra- then inter-node (coalesced_collectives.py all_to_all_quant_reduce).
  bool quantized_gradients = false;
  // mics_shard_size: > 0 partitions the states over shard groups of that many consecutive ranks
  // and all-reduces gradients across the replica groups at the accumulation boundary
  // (zero/mics.py, mics_utils.py); <= 0 means off (default -1).
  int64_t mics_shard_size = -1;
  // mics_hierarchical_params_gather: the shard group's all-gather in two hops, inter-node then
  // intra-node (mics.py _hierarchical_all_gather_params); needs a shard spanning > 1 node.
  bool mics_hierarchical_params_gather = false;
  LeafModuleConfig leaf_module;  // stage 3 only
  bool hpz() const { return stage == 3 && hpz_partition_size > 1; }
  bool mics() const { return stage == 3 && mics_shard_size > 0; }
  // Accepted keys zplan does not model (load_from_fp32_weights, elastic_checkpoint, ...), kept
  // so that a config read and written back loses nothing.
  nlohmann::json other = nlohmann::json::object();
};

struct DsConfig {
  ZeroConfig zero;
  // Resolved batch keys: train_batch_size == micro_batch * gradient_accumulation * dp_world.
  int64_t train_batch_size = 0;
  int64_t micro_batch = 0;  // train_micro_batch_size_per_gpu
  int64_t gradient_accumulation_steps = 1;
  Precision precision = Precision::kFp32;
  Precision grad_accum_dtype = Precision::kFp32;  // data_types.grad_accum_dtype, default = model
  ActivationCheckpointingConfig activation_checkpointing;
  AioConfig aio;
  double gradient_clipping = 1.0;
  // Read from the "optimizer" block, which stays in `other` for writing back.
  OptimizerConfig optimizer;
  // Blocks and keys zplan passes through untouched when writing (optimizer, scheduler, fp16 loss
  // scaling settings, steps_per_print, ...).
  nlohmann::json other = nlohmann::json::object();
};

// DeepSpeed 0.19 wraps the optimizer in BF16_Optimizer (runtime/bf16_optimizer.py), not in the
// ZeRO-1 optimizer, for bf16 training with fp32 gradient accumulation (data_types.grad_accum_dtype)
// at ZeRO stage 1 without optimizer offload (engine.py _do_optimizer_sanity_check returns
// BFLOAT16): the 16-bit gradients are accumulated into a full-size fp32 buffer after every
// backward, all-reduced whole at the boundary, and each rank updates its partition of the fp32
// master weights and states, then all-gathers the 16-bit parameters (docs/cost_model.md).
bool uses_bf16_optimizer(const DsConfig& config);

// The master's dtype is the gradients' accumulation dtype (fp32 training, fp32 grad_accum_dtype,
// or 16-bit master weights in the gradients' dtype): the step's cast of the flat gradient
// partition to the master dtype (Tensor.to) returns the same tensor, so the flat copy is the
// master gradient, with no copy of its own on the GPU (stage_1_and_2.py step:
// flat_grad_partition.to(...); stage3.py _prepare_fp32_grad_for_sub_group).
bool master_grads_alias_grads(const DsConfig& config);
// Bytes per partition element of the step's master-dtype gradient copy on the GPU: the master's
// element size, or 0 when the flat copy is the master gradient (master_grads_alias_grads).
double master_grad_copy_bytes(const DsConfig& config);
// Stage 3 without optimizer offload, master in the parameters' dtype (fp32 training, or 16-bit
// master weights in the training dtype): the optimizer steps the parameters' partition itself,
// with no master copy and no copy back (stage3.py _create_fp32_partitions reuses
// fp16_partitioned_groups_flat when dtype and device match).
bool stage3_master_is_params(const DsConfig& config);

// Ulysses sequence parallelism: the top-level "sequence_parallel_size" DsConfig keeps in `other`
// (1 without it). Each sequence is split over that many consecutive ranks; the batch keys count
// the world divided by it (runtime/config.py), while ZeRO partitions over every rank.
int sequence_parallel_size(const DsConfig& config);

// AutoTP training (docs/cost_model.md "AutoTP tensor parallelism"): the "tensor_parallel" block's
// autotp_size that DsConfig keeps in `other` (1 without it, or at 0 or 1). Each layer's weights
// are split over that many consecutive ranks; ZeRO partitions over the world / it, and
// train_batch_size counts the samples a step trains, micro x gas x world / it.
int autotp_size(const DsConfig& config);
// Its tensor_parallel.tp_overlap_comm (false without it).
bool autotp_overlap_comm(const DsConfig& config);

// What a ds_config's "auto" values and missing batch keys resolve against.
struct ParseContext {
  int dp_world_size = 1;
  int64_t hidden_size = 0;  // for Hugging Face's "auto" bucket sizes (hidden^2 etc.)
  // From the command line; they fill "auto" batch keys and must agree with numbers the file gives.
  // An "auto" without a flag is derived from a given train_batch_size, else the Trainer's default
  // (micro-batch 8, accumulation 1).
  std::optional<int64_t> micro_batch;
  std::optional<int64_t> gradient_accumulation_steps;
  std::optional<int64_t> train_batch_size;
  Precision auto_precision = Precision::kBf16;  // what "enabled": "auto" in bf16/fp16 becomes
  // auto_precision came from --precision: the precision the file enables must then agree with
  // it, as the batch keys must agree with --micro-batch and friends.
  bool precision_from_flag = false;
  // --stage with a file: fills "stage": "auto" (as Accelerate's zero_stage does); a file that
  // gives its stage, or no zero_optimization block, is an error.
  std::optional<int> stage;
  // If set, gets a line for each value of the file that surprises without being an error
  // ("stage": "auto", filled with the Trainer's 2).
  std::vector<std::string>* notes = nullptr;
};

// The attention implementation of the model code, as Hugging Face transformers names it
// (attn_implementation): "eager" (matmul + softmax + matmul, [b, heads, s, s] tensors kept for
// backward), "sdpa" (torch.nn.functional.scaled_dot_product_attention, the default of
// transformers >= 4.36 where PyTorch has it; causal training dispatches to its flash or
// memory-efficient kernels), "flash_attention_2" and "flash_attention_3" (the flash-attn
// packages; FA3 needs Hopper). The fused three keep O(b*s*heads) softmax statistics, not s^2.
enum class Attention { kEager, kSdpa, kFlash2, kFlash3 };
// "eager", "sdpa", "flash_attention_2", "flash_attention_3".
const char* attention_name(Attention a);
// Reads a name as --attention takes it: the HF spellings above, or "flash2" / "flash3"
// (case-insensitive); nullopt for anything else.
std::optional<Attention> attention_from_name(const std::string& name);

// What is trained, beyond the model and the ds_config: the sequence length, the attention
// implementation and the loss kernel. (Activation checkpointing is in
// DsConfig::activation_checkpointing.)
struct Workload {
  int64_t seq_len = 2048;
  Attention attention = Attention::kSdpa;
  // A fused linear + cross-entropy loss (Liger's LigerFusedLinearCrossEntropyLoss, Apple's Cut
  // Cross-Entropy): the [b, s, vocab] logits and their fp32 copies are never materialized.
  bool fused_loss = false;
  // Liger-Kernel's SwiGLU (LigerSiLUMulFunction, liger_kernel/ops/swiglu.py) and RMSNorm
  // (LigerRMSNorm), which Liger's patches (use_liger_kernel=True, apply_liger_kernel_to_llama)
  // install with its fused loss: the MLP and the norms keep fewer tensors
  // (models::ActivationOptions::fused_swiglu, fused_rmsnorm). Set by --loss liger.
  bool fused_swiglu = false;
  // Without the fused loss: whether the loss upcasts the logits to fp32 first (Hugging Face's
  // ForCausalLMLoss does); false = the loss on the 16-bit logits, as 2021 transformers' GPT-2
  // computed it (--loss no-upcast; models::ActivationOptions::loss_upcast).
  bool loss_upcast = true;
  // Ulysses sequence parallelism (sim/sequence_parallel.h): each sequence is split over this
  // many ranks; from the ds_config's "sequence_parallel_size" (sequence_parallel_size()).
  int sequence_parallel = 1;
  // AutoTP training (sim/tensor_parallel.h): each layer's weights split over this many GPUs of
  // a node; from the ds_config's tensor_parallel.autotp_size (autotp_size()). The model the
  // simulator is given must be that size's shard (models::tensor_parallel_shard).
  int tensor_parallel = 1;
  // tensor_parallel.tp_overlap_comm: the column-split layers' input-gradient all-reduce runs
  // beside their weight-gradient GEMM (sim/tensor_parallel.h).
  bool tp_overlap_comm = false;
  // Stage 3: whether the model was built under deepspeed.zero.Init (Hugging Face's Trainer and
  // Accelerate build it so: from_pretrained under HfDeepSpeedConfig). false (--no-zero-init):
  // it was built on the host and handed to deepspeed.initialize, whose engine moves it whole to
  // the GPU before stage 3 partitions it (sim::init_gpu_memory). No effect below stage 3.
  bool zero_init = true;

  // The --loss name: "liger", "fused", "standard" or "no-upcast".
  const char* loss_name() const {
    return fused_swiglu ? "liger" : fused_loss ? "fused" : loss_upcast ? "standard" : "no-upcast";
  }
  // sdpa and flash: a fused kernel, no s^2 tensor stored, masked blocks skipped.
  bool fused_attention() const { return attention != Attention::kEager; }
};

// Reads a ds_config JSON document. Throws InputError naming `file` and the JSON pointer for:
// an unknown key inside zero_optimization / offload_param / offload_optimizer / fp16 / bf16, a
// wrong type, a stage outside 0-3, a negative or zero size, inconsistent batch keys, no batch
// key at all, offload_param without stage 3, NVMe optimizer offload or ratio < 1 without
// stage 3, fp16 and bf16 both enabled, a precision other than the one --precision gave
// (context.precision_from_flag).
DsConfig parse_ds_config(const nlohmann::json& json, const std::string& file,
                         const ParseContext& context);
DsConfig load_ds_config(const std::string& path, const ParseContext& context);

// What is wrong with a ZeRO stage outside 0-3 ("must be a ZeRO stage 0, 1, 2 or 3, got 5"), for
// every place a stage comes from (the file, --stage); nullopt for 0-3.
std::optional<std::string> stage_range_problem(int64_t stage);

// Completes a config built in code from settings given one by one (the command line's ZeRO
// flags), as parse_ds_config completes a file that gives no batch keys: the batch keys are
// resolved from context's micro_batch, gradient_accumulation_steps and train_batch_size (at
// least one of micro_batch and train_batch_size set), then the config is checked. Throws
// InputError naming the flag, or `where` and the JSON pointer, with parse_ds_config's messages.
void complete_ds_config(DsConfig& config, const ParseContext& context, const std::string& where);

// Checks the invariants parse_ds_config enforces on a config built in code (the planner's); throws
// InputError with `where` as the location.
void validate_ds_config(const DsConfig& config, int dp_world_size, const std::string& where);

// A ds_config.json DeepSpeed 0.19 accepts: consistent batch keys, only keys it knows.
nlohmann::json ds_config_to_json(const DsConfig& config);

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_ZERO_CONFIG_H_
