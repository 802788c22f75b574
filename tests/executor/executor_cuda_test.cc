// The CUDA executor device against the CPU device, on one rank: the same training run must end
// with the same weights (cuBLAS and OpenBLAS sum in different orders: within fp32 rounding) and
// the same tracked memory (both allocate the same buffers). On a machine without a GPU, or a
// build without the CUDA device, the comparisons are skipped with a warning and only the
// "no device" path is checked; docs/validation.md says where this ran on a GPU.
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "executor/executor.h"
#include "base/input_error.h"
#include "tests/executor/executor_test_util.h"

namespace zplan::executor {
namespace {

using nlohmann::json;

struct OneRank {
  ExecutionResult result;
  bool ran = false;
};

// Runs 3 optimizer steps of `config` on one rank of `device_kind`; ran = false when there is no
// CUDA device to run on.
OneRank run_one(const std::string& device_kind, const json& config_json) {
  const models::Model model = models::load_model("tiny-mlp-s");
  const hardware::Cluster cluster = hardware::make_cluster(testing::cpu_test_profile(), 1, 1);
  const sim::DsConfig config = testing::ds_config(config_json, 1);
  sim::Workload workload;
  workload.seq_len = model.shape().default_seq_len;
  auto comms = kernels::make_thread_comms(1, kExecutorChannels);
  std::unique_ptr<ExecutorDevice> device;
  OneRank out;
  if (device_kind == "cuda") {
    try {
      device = make_cuda_device(comms[0].get(), 60);
    } catch (const InputError& e) {
      WARN("no CUDA executor device here, comparison skipped: " << e.what());
      return out;
    }
  } else {
    CpuDeviceOptions o;
    o.blas_threads = 1;
    device = make_cpu_device(comms[0].get(), o);
  }
  ExecuteOptions o;
  o.warmup_steps = 0;
  o.steps = 3;
  o.keep_weights = true;
  o.swap_dir = "/tmp";
  out.result = execute_steps(model, cluster, config, workload, *device, o);
  out.ran = true;
  return out;
}

TEST_CASE("the CUDA device trains like the CPU device", "[executor][gpu]") {
  struct Case {
    int stage;
    int gas;
    std::string offload;
  };
  const std::vector<Case> cases = {{0, 1, "none"}, {1, 2, "none"}, {2, 2, "none"},
                                   {3, 2, "none"}, {2, 2, "cpu"},  {3, 2, "cpu"},
                                   {3, 1, "nvme"}};
  for (const Case& c : cases) {
    INFO("stage " << c.stage << " gas " << c.gas << " offload " << c.offload);
    json z = {{"stage", c.stage}, {"reduce_bucket_size", 100000}};
    if (c.stage == 3) {
      z["stage3_param_persistence_threshold"] = 1000;
      z["sub_group_size"] = 100000;
    }
    if (c.offload != "none") z["offload_optimizer"] = {{"device", c.offload}};
    if (c.offload == "nvme") z["offload_optimizer"]["nvme_path"] = "/tmp";
    const json config = {
        {"train_batch_size", 16}, {"gradient_accumulation_steps", c.gas}, {"zero_optimization", z}};
    const OneRank gpu = run_one("cuda", config);
    if (!gpu.ran) return;
    const OneRank cpu = run_one("cpu", config);
    REQUIRE(gpu.result.weights.size() == cpu.result.weights.size());
    double diff = 0;
    for (size_t i = 0; i < cpu.result.weights.size(); ++i) {
      diff = std::max(diff, std::fabs(double(gpu.result.weights[i]) - cpu.result.weights[i]));
    }
    // As the multi-rank numerics test: 1e-6 on O(0.06) weights after 3 Adam steps.
    CHECK(diff <= 1e-6);
    for (size_t s = 0; s < cpu.result.loss.size(); ++s) {
      CHECK(gpu.result.loss[s] == Approx(cpu.result.loss[s]).epsilon(1e-5));
    }
    // Both devices allocate the same buffers through the tracker. Peaks may differ by what is
    // live at once (the streams overlap differently), by no more than the simulator's tolerance.
    for (int t = 0; t < sim::kNumTiers; ++t) {
      INFO("tier " << t);
      CHECK(gpu.result.peak_bytes[t] ==
            Approx(cpu.result.peak_bytes[t]).epsilon(0.03).margin(256.0 * 256 * 4));
    }
  }
}

}  // namespace
}  // namespace zplan::executor
