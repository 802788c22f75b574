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

#include "hardware/profile.h"
#include "models/model.h"
#include "sim/zero_config.h"

namespace zplan::sim {

enum class Tier { kGpu, kPinnedHost, kHost, kNvme };
inline constexpr int kNumTiers = 4;

enum class Category {
  kParams16,        // model-dtype parameters: all of them (stages 0-2) or this rank's partition
  kMaster32,        // fp32 master weights
  kOptimizerStates, // Adam exp_avg and exp_avg_sq
  kGrads,           // model-dtype gradients: full, partition, accumulation buffers
  kGrads32,         // fp32 gradients: step() copies, offloaded fp32 gradient partitions
  kBuckets,         // IPG reduction buckets and their flatten temporaries
  kGatheredParams,  // stage 3: full parameters gathered (current module, prefetch, persistent)
  kActivations,     // stored activations and their gradients' workspace
  kCheckpoints,     // activation checkpoints (layer inputs under full checkpointing)
  kSwapBuffers,     // NVMe swap buffers in pinned host memory
  kRuntime,         // CUDA context, NCCL buffers, allocator fragmentation, the host process
};
inline constexpr int kNumCategories = 11;

enum class Phase { kForward, kBackward, kStep };
inline constexpr int kNumPhases = 3;

const char* tier_name(Tier tier);              // "gpu", "pinned_host", "host", "nvme"
const char* category_name(Category category);  // "params16", "master32", ...
const char* phase_name(Phase phase);           // "forward", "backward", "step"

struct MemoryBreakdown {
  std::array<double, kNumCategories> bytes{};

  double& operator[](Category c) { return bytes[static_cast<int>(c)]; }
  double operator[](Category c) const { return bytes[static_cast<int>(c)]; }
  double total() const;
  Category dominant() const;  // the largest category (the first one on ties)
  MemoryBreakdown& operator+=(const MemoryBreakdown& other);
  MemoryBreakdown scaled(double factor) const;
};

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

  const TierSummary& operator[](Tier t) const { return tiers[static_cast<int>(t)]; }
  bool gpu_fits(double headroom_fraction = 0) const;
  bool host_fits(double headroom_fraction = 0) const;
  bool nvme_fits(double headroom_fraction = 0) const;
  bool fits(double headroom_fraction = 0) const;
  // Bytes over capacity (after headroom) of the GPU, or 0.
  double gpu_short_by(double headroom_fraction = 0) const;
};

// REQUIRES: config passed validate_ds_config for cluster.gpus.
MemoryReport analyze_memory(const models::Model& model, const hardware::Cluster& cluster,
                            const DsConfig& config, const Workload& workload);

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_MEMORY_MODEL_H_
