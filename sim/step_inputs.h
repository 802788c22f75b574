// The inputs of the step builder and of zero_sizes, normalized: what they read of a
// configuration, with every value that cannot change their output set to one representative.
//
// They take these structs rather than the DsConfig (StepBuilder normalizes what it is given;
// zero_sizes reads SizesInputs only), so nothing they read can be missing from them; and the
// memos of their outputs -- ZeroSizesCache, the planner's step memo -- key on fingerprint(),
// which hashes the whole struct through one list of its fields per struct. Each list is a
// structured binding of every member (step_inputs.cc), which fails to compile when a member is
// added, so a new field cannot be left out of a key.
#ifndef ZPLAN_SIM_STEP_INPUTS_H_
#define ZPLAN_SIM_STEP_INPUTS_H_

#include <cstdint>

#include "sim/ds_config/zero_config.h"
#include "sim/fingerprint.h"

namespace zplan::sim {

struct ZeroSizes;

// What zero_sizes reads besides the model. The stage-3 knobs are 0 below stage 3 and the
// offload ratio is 0 without optimizer offload: zero_sizes reads them only then.
struct SizesInputs {
  int dp = 1;  // data-parallel ranks
  Precision precision = Precision::kFp32;
  Precision grad_accum_dtype = Precision::kFp32;
  int stage = 0;
  int64_t reduce_bucket_size = 0;
  OffloadDevice offload_optimizer = OffloadDevice::kNone;
  int64_t param_persistence_threshold = 0;
  int64_t model_persistence_threshold = 0;
  int64_t max_reuse_distance = 0;
  int64_t sub_group_size = 0;
  double offload_ratio = 0;
  LeafModuleConfig leaf_module;  // which MoE blocks stage 3 gathers whole (moe_block_is_leaf)
};
SizesInputs sizes_inputs(int dp, const DsConfig& config);

// What the step builder (and simulate_step around it) reads of a configuration: the ds_config
// and the workload, normalized by step_inputs().
struct StepInputs {
  DsConfig config;
  Workload workload;
};

// `config` and `workload` normalized:
//  * the pass-through `other` blocks (read only by the ds_config writer) are emptied;
//  * stage 3's prefetch window min(stage3_prefetch_bucket_size, stage3_max_live_parameters) --
//    the only place the builder reads either knob -- becomes both knobs, and 0 when it is below
//    StepBuilder::inert_prefetch_window(sizes) (such a window builds the graphs a window of 0
//    builds) or below stage 3.
// REQUIRES: sizes == zero_sizes(model, dp, config) (only its module fetches are read).
StepInputs step_inputs(const DsConfig& config, const Workload& workload, const ZeroSizes& sizes);

// 128-bit fingerprints of every field, for memo keys (two different inputs collide with
// probability ~2^-128).
GraphFingerprint fingerprint(const SizesInputs& inputs);
GraphFingerprint fingerprint(const StepInputs& inputs);

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_STEP_INPUTS_H_
