// Memory by where it lives (Tier) and what it holds (Category): the vocabulary that the analytic
// memory model (sim/memory_model.h), the step graph's memory effects (sim/step_graph.h) and the
// engine's memory timeline share. A leaf: it includes nothing of zplan, so the engine's headers
// can use it without the ds_config, the models or nlohmann/json. All figures are bytes.
#ifndef ZPLAN_SIM_MEMORY_BREAKDOWN_H_
#define ZPLAN_SIM_MEMORY_BREAKDOWN_H_

#include <array>

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

const char* tier_name(Tier tier);              // "gpu", "pinned_host", "host", "nvme"
const char* category_name(Category category);  // "params16", "master32", ...

struct MemoryBreakdown {
  std::array<double, kNumCategories> bytes{};

  double& operator[](Category c) { return bytes[static_cast<int>(c)]; }
  double operator[](Category c) const { return bytes[static_cast<int>(c)]; }
  double total() const;
  Category dominant() const;  // the largest category (the first one on ties)
  MemoryBreakdown& operator+=(const MemoryBreakdown& other);
  MemoryBreakdown scaled(double factor) const;
  // Adds the caching allocator's fragmentation, `fraction` of the non-runtime bytes, to the
  // runtime category (RuntimeSpec::allocator_fragmentation; GPU memory only).
  void add_fragmentation(double fraction);
};

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_MEMORY_BREAKDOWN_H_
