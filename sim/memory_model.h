// The analytic memory model: bytes per GPU, pinned host, pageable host and NVMe for one training
// step of a model under a ZeRO configuration, following what DeepSpeed 0.19 really allocates
// (reference/deepspeed_internals.md §2, cited term by term in memory_model.cc).
//
// It is fast (no simulation) and is what the planner prunes with. The simulator's memory
// timeline holds the same steady-state terms and may only add what its schedule adds (a test).
// All figures are bytes; GPU figures are per GPU, host and NVMe figures per node (every rank on
// the node adds its share), which is what the capacities in a profile describe.
#ifndef ZPLAN_SIM_MEMORY_MODEL_H_
#define ZPLAN_SIM_MEMORY_MODEL_H_

#include <array>
#include <string>
#include <unordered_map>
#include <vector>

#include "hardware/profile.h"
#include "models/model.h"
#include "sim/fingerprint.h"
#include "sim/ds_config/zero_config.h"
#include "sim/memory_breakdown.h"
#include "sim/memory_fit.h"
#include "sim/step_inputs.h"

namespace zplan::sim {

// The phases of a training step, and kInit: deepspeed.initialize before the first step, a peak
// only when stage 3 partitions a model built outside zero.Init (init_gpu_memory). MemoryReport
// keeps a PhaseMemory per step phase (kNumPhases); kInit appears only as a tier's peak_phase.
enum class Phase { kForward, kBackward, kStep, kInit };
inline constexpr int kNumPhases = 3;
const char* phase_name(Phase phase);  // "forward", "backward", "step", "init"

// Stage 0 all-reduces gradients in flattened pieces of MEMORY_OPT_ALLREDUCE_SIZE elements
// (engine.py: buffered_allreduce_fallback), reference/deepspeed_internals.md §4.2.
inline constexpr double kStage0AllreduceElems = 500'000'000;

// Memory of every tier at one phase's peak. GPU: per GPU. Host tiers and NVMe: per node.
struct PhaseMemory {
  Phase phase = Phase::kForward;
  std::array<MemoryBreakdown, kNumTiers> tiers;

  const MemoryBreakdown& operator[](Tier t) const { return tiers[static_cast<int>(t)]; }
  MemoryBreakdown& operator[](Tier t) { return tiers[static_cast<int>(t)]; }
};

struct TierSummary {
  double peak_bytes = 0;
  Phase peak_phase = Phase::kForward;
  MemoryBreakdown at_peak;
  double capacity_bytes = 0;  // GPU memory; host memory of a node (pinned and pageable share it);
                              // NVMe capacity of a node
};

struct MemoryReport {
  std::array<PhaseMemory, kNumPhases> phases;
  std::array<TierSummary, kNumTiers> tiers;
  // Host memory is one pool: pinned + pageable at their combined peak, against host capacity.
  double host_peak_bytes = 0;
  // Persistent model states on the GPU (params, grads, optimizer states), no transients: the
  // quantity the ZeRO paper's 16Ψ / 4Ψ+12Ψ/N / 2Ψ+14Ψ/N / 16Ψ/N formulas describe.
  double gpu_model_state_bytes = 0;
  // The master partition's dtype (OptimizerConfig::master_dtype), for naming its rows.
  Precision master_dtype = Precision::kFp32;

  const TierSummary& operator[](Tier t) const { return tiers[static_cast<int>(t)]; }
  // The GPU peak, the host peak (host_peak_bytes) and the NVMe peak against the tiers' capacities.
  MemoryFit fit(double headroom_fraction = 0) const;
};

// The sizes DeepSpeed derives from (model, data-parallel size, config) before it allocates:
// partition sizes with its padding, the stage-3 persistent set and sub-groups, bucket sizes.
// Both this analytic model and the step-graph builder start from these, so the two memory views
// share one set of numbers. Element counts unless the name says bytes.
struct ZeroSizes {
  int dp = 1;                  // data-parallel ranks the states are partitioned over
  int param_bytes = 2;         // model dtype
  int grad_accum_bytes = 2;    // data_types.grad_accum_dtype (default: model dtype)
  double psi = 0;              // all parameters
  double train_psi = 0;        // trainable parameters (== psi unless some are frozen); gradients,
                               // fp32 master weights and optimizer states exist for these only
  double partition = 0;        // this rank's partition of the trainable parameters: stage 1/2
                               // flat buffer padded to a multiple of 2*dp, stage 3 each tensor
                               // padded to a multiple of dp; stage 0 all of them
  double param_partition = 0;  // stage 3: this rank's 16-bit partition of all parameters (frozen
                               // ones are partitioned too); other stages: == partition
  double largest_param = 0;    // largest single trainable tensor
  double bucket = 0;           // reduce_bucket_size
  // Stage 3 only.
  double persistent = 0;        // params kept gathered (numel <= persistence threshold)
  double largest_fetch = 0;     // largest module's non-persistent params (one fetch)
  double non_persistent = 0;    // psi - persistent
  double reuse_retained = 0;    // params still gathered when backward starts (max_reuse_distance)
  double max_sub_group = 0;     // largest optimizer sub-group (partition elements)
  double largest_sub_group_numel = 0;  // its tensors' full (unpartitioned) elements
  int sub_groups = 1;
  std::vector<double> sub_group_sizes;  // partition elements of each optimizer sub-group
  // Per layer, per module (Layer::modules order): elements a fetch of it gathers (its
  // non-persistent parameters; 0 when everything in it is persistent). A sparse MoE block that
  // stage 3 treats as a leaf (moe_block_is_leaf) is one fetch: its first module holds the whole
  // block's elements, the block's other modules 0.
  std::vector<std::vector<double>> module_fetch;
  // The same, counting the parameter tensors a fetch gathers (its hooks loop over them).
  std::vector<std::vector<int>> module_fetch_tensors;
  double cpu_partition = 0;     // partition elements whose optimizer runs on the CPU (offload,
                                // ratio < 1 keeps the first sub-groups on the GPU)
};

// Activation bytes of one micro-batch, per layer, as both memory views use them.
struct ActivationPlan {
  std::vector<double> kept;   // kept from the layer's forward to its backward: the checkpoint
                              // of a checkpointed layer, else its stored activations
  std::vector<double> extra;  // transient while it runs: workspace (+ its stored activations
                              // again when it is checkpointed and recomputed)
  std::vector<double> stored; // its stored activations (what a recompute rebuilds)
  std::vector<bool> checkpointed;
  bool checkpoints_on_host = false;  // cpu_checkpointing
};
ActivationPlan plan_activations(const models::Model& model, const DsConfig& config,
                                const Workload& workload);

// Whether ZeRO-3 treats the sparse MoE block of the `block`-th decoder layer (0-based: the
// model.layers.<block> of Hugging Face's module names) as a leaf under `leaf`, as
// deepspeed/utils/z3_leaf_module.py matches it: its class by name or fully qualified name
// (ModelShape::moe_block_class), its module name model.layers.<block>.<moe_block_name>, or a
// suffix of that name. False for a model without experts.
bool moe_block_is_leaf(const models::ModelShape& shape, int64_t block,
                       const LeafModuleConfig& leaf);

// The class name (ModelShape::moe_block_class without its module path) that
// zero_optimization.leaf_module.classes would need to make every MoE block of `model` a leaf
// under `zero`, or "" when they all are one already (or the model has no experts, or the stage is
// not 3). The planner writes it into the files it recommends; a file that leaves it out gets
// moe_leaf_note.
std::string missing_moe_leaf_class(const models::Model& model, const ZeroConfig& zero);
// A note for a stage-3 file whose MoE blocks are not leaves (missing_moe_leaf_class non-empty),
// naming `file`'s key; "" otherwise.
std::string moe_leaf_note(const models::Model& model, const ZeroConfig& zero,
                          const std::string& file);

// REQUIRES: the inputs of a config that passed validate_ds_config for inputs.dp.
ZeroSizes zero_sizes(const models::Model& model, const SizesInputs& inputs);
// zero_sizes(model, sizes_inputs(dp, config)).
ZeroSizes zero_sizes(const models::Model& model, int dp, const DsConfig& config);

// zero_sizes of many configs, each distinct one computed once: the planner's configs differ
// mostly in knobs zero_sizes does not read. Keyed by the whole SizesInputs zero_sizes takes (and
// the model's name and size, as a guard). Not thread-safe.
class ZeroSizesCache {
 public:
  // The reference stays valid until the next get().
  const ZeroSizes& get(const models::Model& model, int dp, const DsConfig& config);

 private:
  std::unordered_map<GraphFingerprint, ZeroSizes, GraphFingerprintHash> sizes_;
};

// Memory that lives for the whole step (model states, persistent buffers, runtime), per rank:
// GPU per GPU, host tiers and NVMe for this one rank. Adam states are counted as after the
// first step. Every term cites the DeepSpeed allocation it stands for in memory_model.cc.
std::array<MemoryBreakdown, kNumTiers> persistent_memory(const ZeroSizes& sizes,
                                                         const hardware::Cluster& cluster,
                                                         const DsConfig& config);

// The GPU (per GPU, without fragmentation) while deepspeed.initialize holds the whole model
// before stage 3 partitions it: stage 3 with workload.zero_init false, else all zero. The engine
// moves a module that is not already partitioned to the GPU in the model dtype
// (engine.py DeepSpeedEngine._configure_distributed_model: `self.module.to(self.device)` unless
// is_zero_init_model, after _cast_module_mixed_precision), then DeepSpeedZeRoOffload converts it
// parameter by parameter (partition_parameters.py Init._convert_to_zero_parameters ->
// _zero_init_param -> partition), so the peak is the whole 16-bit model; stage3.py's defragment
// (runtime/zero/utils.py) then empties the allocator's cache before training. Counted as
// kParams16, with the runtime (CUDA context, NCCL buffers: the conversion broadcasts).
MemoryBreakdown init_gpu_memory(const ZeroSizes& sizes, const hardware::Cluster& cluster,
                                const DsConfig& config, const Workload& workload);

// REQUIRES: config passed validate_ds_config for cluster.gpus; `model` is the shard of
// workload.tensor_parallel (models::tensor_parallel_shard), partitioned over the GPUs / it.
MemoryReport analyze_memory(const models::Model& model, const hardware::Cluster& cluster,
                            const DsConfig& config, const Workload& workload);
// The same, from the sizes and activations the caller already has (zero_sizes for
// cluster.gpus and plan_activations of the same config and workload).
MemoryReport analyze_memory(const models::Model& model, const hardware::Cluster& cluster,
                            const DsConfig& config, const Workload& workload,
                            const ZeroSizes& sizes, const ActivationPlan& acts);

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_MEMORY_MODEL_H_
