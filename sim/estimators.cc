// Line-for-line arithmetic of DeepSpeed's estimators (reference/deepspeed_internals.md §3.1,
// §3.2). Python's int() truncates toward zero, as static_cast<int64_t> does, and every product is
// formed in the same left-to-right order as the Python source, so that the float rounding -- and
// with it the truncated byte count -- is the same. (Integer products below 2^53 are exact in double,
// as they are in Python's int.)
#include "sim/estimators.h"

#include <algorithm>
#include <cstdio>

namespace zplan::sim {

EstimatorRow estimate_zero2(int64_t total_params, int gpus_per_node, int nodes, bool cpu_offload,
                            double additional_buffer_factor) {
  const int64_t total_gpus = static_cast<int64_t>(nodes) * gpus_per_node;
  const double params = static_cast<double>(total_params);
  EstimatorRow row;
  if (cpu_offload) {
    row.gpu_bytes = 2 * total_params;
    row.cpu_bytes = static_cast<int64_t>(
        params * static_cast<double>(std::max<int64_t>(4 * total_gpus, 16)) *
        additional_buffer_factor);
  } else {
    // 2 = 16-bit params; 18 = 16-bit grads 2 + fp32 grads 4 + fp32 params 4 + Adam 8 (DeepSpeed's
    // comment). This is the formula since PR #5099; the docs still show the older 4 + 16/N.
    row.gpu_bytes =
        2 * total_params + static_cast<int64_t>(18.0 * params / static_cast<double>(total_gpus));
    row.cpu_bytes = static_cast<int64_t>(params * 4 * gpus_per_node * additional_buffer_factor);
  }
  return row;
}

EstimatorRow estimate_zero3(int64_t total_params, int64_t largest_layer_params, int gpus_per_node,
                            int nodes, bool cpu_offload, bool cpu_offload_params, bool zero_init,
                            double additional_buffer_factor) {
  const int64_t total_gpus = static_cast<int64_t>(nodes) * gpus_per_node;
  const double gpus_factor = 1.0 / nodes;
  const int64_t largest_layer_memory = 4 * largest_layer_params;
  const double params = static_cast<double>(total_params);
  EstimatorRow row;
  if (cpu_offload) {
    if (cpu_offload_params) {
      row.gpu_bytes = largest_layer_memory;
      row.cpu_bytes = static_cast<int64_t>(
          zero_init ? params * 18 * gpus_factor * additional_buffer_factor
                    : params * std::max<double>(4.0 * gpus_per_node, 18 * gpus_factor) *
                          additional_buffer_factor);
    } else {
      row.gpu_bytes = largest_layer_memory +
                      static_cast<int64_t>(2.0 * params / static_cast<double>(total_gpus));
      row.cpu_bytes = static_cast<int64_t>(
          zero_init ? params * 16 * gpus_factor * additional_buffer_factor
                    : params * std::max<double>(4.0 * gpus_per_node, 16 * gpus_factor) *
                          additional_buffer_factor);
    }
  } else {
    row.gpu_bytes = largest_layer_memory +
                    static_cast<int64_t>(18.0 * params / static_cast<double>(total_gpus));
    row.cpu_bytes =
        zero_init ? static_cast<int64_t>(static_cast<double>(largest_layer_params) * 4 *
                                         gpus_per_node * additional_buffer_factor)
                  : static_cast<int64_t>(params * 4 * gpus_per_node * additional_buffer_factor);
  }
  return row;
}

std::vector<EstimatorRow> estimate_zero2_all_cold(int64_t total_params, int gpus_per_node,
                                                  int nodes, double additional_buffer_factor) {
  std::vector<EstimatorRow> rows;
  for (bool offload : {true, false}) {
    EstimatorRow r =
        estimate_zero2(total_params, gpus_per_node, nodes, offload, additional_buffer_factor);
    r.options = std::string("offload_optimizer=") + (offload ? "cpu" : "none");
    rows.push_back(r);
  }
  return rows;
}

std::vector<EstimatorRow> estimate_zero3_all_cold(int64_t total_params,
                                                  int64_t largest_layer_params, int gpus_per_node,
                                                  int nodes, double additional_buffer_factor) {
  // DeepSpeed's order; cpu_offload=False with cpu_offload_params=True is skipped (§3.2).
  struct Case {
    bool offload_param, offload_optimizer, zero_init;
  };
  const Case cases[] = {{true, true, true},   {true, true, false},  {false, true, true},
                        {false, true, false}, {false, false, true}, {false, false, false}};
  std::vector<EstimatorRow> rows;
  for (const Case& c : cases) {
    EstimatorRow r = estimate_zero3(total_params, largest_layer_params, gpus_per_node, nodes,
                                    c.offload_optimizer, c.offload_param, c.zero_init,
                                    additional_buffer_factor);
    r.options = std::string("offload_param=") + (c.offload_param ? "cpu" : "none") +
                ", offload_optimizer=" + (c.offload_optimizer ? "cpu" : "none") +
                ", zero_init=" + (c.zero_init ? "1" : "0");
    rows.push_back(r);
  }
  return rows;
}

std::string deepspeed_gb(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fGB", static_cast<double>(bytes) / (1 << 30));
  return buf;
}

}  // namespace zplan::sim
