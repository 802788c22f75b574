// Helpers for the sim/ tests: an idealized hardware profile whose costs can be worked out on
// paper, and short ways to make configs.
#ifndef ZPLAN_TESTS_SIM_SIM_TEST_UTIL_H_
#define ZPLAN_TESTS_SIM_SIM_TEST_UTIL_H_

#include "hardware/profile.h"
#include "models/catalog.h"
#include "models/model.h"
#include "sim/ds_config/zero_config.h"

namespace zplan::sim::testing {

// 8 GPUs per node, every GEMM at exactly 100 TFLOP/s, HBM so fast that memory-bound kernels cost
// nothing, no launch overheads, no runtime memory: step times reduce to FLOPs / rate and
// collective formulas.
inline hardware::Profile ideal_profile() {
  hardware::Profile p;
  p.name = "ideal";
  p.gpu.name = "ideal";
  p.gpu.arch = hardware::Arch::kAmpere;
  p.gpu.memory_bytes = 80.0 * (1LL << 30);
  p.gpu.peak_flops_per_s = 100e12;
  p.gpu.peak_fp32_flops_per_s = 100e12;
  p.gpu.hbm_bw_bytes_per_s = 1e18;
  p.gpu.hbm_efficiency = 1;
  p.gpu.gemm_efficiency = {{1, 1.0}, {1e18, 1.0}};
  p.gpu.kernel_launch_s = 0;
  p.gpu.attention_efficiency = 1;
  p.gpu.comm_compute_slowdown = 0;
  p.gpu.framework_efficiency = 1;
  p.framework = hardware::FrameworkSpec();  // no framework terms (hardware/framework.h)
  p.node.gpus_per_node = 8;
  p.node.intra_link = hardware::IntraLink::kNvlink;
  p.node.intra_busbw_bytes_per_s = 200e9;
  p.node.h2d_pinned_bytes_per_s = 20e9;
  p.node.d2h_pinned_bytes_per_s = 20e9;
  p.node.h2d_pageable_bytes_per_s = 10e9;
  p.node.d2h_pageable_bytes_per_s = 10e9;
  p.node.gpus_per_pcie_switch = 1;
  p.node.pcie_uplink_bytes_per_s = 20e9;
  p.node.cpu_cores = 64;
  p.node.host_memory_bytes = 1024.0 * (1LL << 30);
  p.node.host_memory_bw_bytes_per_s = 200e9;
  p.node.cpu_adam_params_per_s_per_core = 1e8;
  p.node.nvme_read_bytes_per_s = 10e9;
  p.node.nvme_write_bytes_per_s = 5e9;
  p.node.nvme_capacity_bytes = 10000.0 * (1LL << 30);
  p.network.nics_per_node = 8;
  p.network.nic_bw_bytes_per_s = 25e9;
  p.network.latency_s = 5e-6;
  return p;
}

inline hardware::Cluster ideal_cluster(int gpus, int nodes = 1) {
  return hardware::make_cluster(ideal_profile(), gpus, nodes);
}

// A ds_config from JSON text for `dp` ranks and a model of hidden size `hidden`.
inline DsConfig config(const std::string& json, int dp, int64_t hidden = 1024) {
  ParseContext c;
  c.dp_world_size = dp;
  c.hidden_size = hidden;
  return parse_ds_config(nlohmann::json::parse(json), "test", c);
}

// A model of exactly `params` parameters in one tensor (to compare with formulas in Ψ).
inline models::Model one_tensor_model(int64_t params) {
  models::ModelShape shape;
  shape.name = "one-tensor";
  shape.family = models::Family::kMlp;
  shape.layers = 1;
  shape.hidden = 1024;
  shape.default_seq_len = 1;
  models::Layer layer;
  layer.name = "w";
  layer.kind = models::LayerKind::kLinear;
  layer.modules.push_back(models::Module{"w", {models::Param{"w.weight", params}}, ""});
  models::ComputeOp op;
  op.name = "matmul";
  op.kind = models::OpKind::kGemm;
  op.n = 1024;
  op.k = 1024;
  op.module = 0;
  layer.ops.push_back(op);
  return models::Model(shape, {layer});
}

}  // namespace zplan::sim::testing

#endif  // ZPLAN_TESTS_SIM_SIM_TEST_UTIL_H_
