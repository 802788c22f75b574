// DeepSpeed's own memory estimators, reproduced to the byte, because users will compare:
//   estimate_zero2_model_states_mem_needs / _all_cold  (deepspeed/runtime/zero/stage_1_and_2.py)
//   estimate_zero3_model_states_mem_needs / _all_cold  (deepspeed/runtime/zero/stage3.py)
// as of DeepSpeed 0.19 (reference/deepspeed_internals.md §3). They count model states only --
// no activations, buckets, gathered parameters or runtime -- which is why zplan's own model
// (sim/memory_model.h) reports far more. `zplan memory --compat deepspeed-estimator` prints them.
#ifndef ZPLAN_SIM_ESTIMATORS_H_
#define ZPLAN_SIM_ESTIMATORS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace zplan::sim {

struct EstimatorRow {
  std::string options;  // as DeepSpeed prints them, e.g. "offload_param=cpu, offload_optimizer=cpu, zero_init=1"
  int64_t cpu_bytes = 0;
  int64_t gpu_bytes = 0;
};

// estimate_zero2_model_states_mem_needs: {cpu_mem, gpu_mem} in bytes.
EstimatorRow estimate_zero2(int64_t total_params, int gpus_per_node, int nodes, bool cpu_offload,
                            double additional_buffer_factor = 1.5);

// estimate_zero3_model_states_mem_needs: {cpu_mem, gpu_mem}; largest_layer_memory is 4 x
// largest_layer_params.
EstimatorRow estimate_zero3(int64_t total_params, int64_t largest_layer_params, int gpus_per_node,
                            int nodes, bool cpu_offload, bool cpu_offload_params, bool zero_init,
                            double additional_buffer_factor = 1.5);

// The rows the _all_cold functions print, in DeepSpeed's order.
std::vector<EstimatorRow> estimate_zero2_all_cold(int64_t total_params, int gpus_per_node,
                                                  int nodes,
                                                  double additional_buffer_factor = 1.5);
std::vector<EstimatorRow> estimate_zero3_all_cold(int64_t total_params,
                                                  int64_t largest_layer_params, int gpus_per_node,
                                                  int nodes,
                                                  double additional_buffer_factor = 1.5);

// DeepSpeed's printout: bytes / 2**30 with two decimals and the unit "GB" (really GiB).
std::string deepspeed_gb(int64_t bytes);

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_ESTIMATORS_H_
