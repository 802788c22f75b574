// Issue 16 (defects 1 and 3): the optimizer the ds_config's block builds in the memory model, the
// step graph and the CPU step cost; and BF16_Optimizer, which DeepSpeed runs for bf16 with fp32
// accumulation at ZeRO stage 1. Closed forms in bytes of Ψ = 1,048,576,000 parameters on 8 GPUs
// (a multiple of 2 x 8, so DeepSpeed's padding adds nothing).
#include <catch2/catch.hpp>

#include "hardware/cost_model.h"
#include "sim/memory_model.h"
#include "sim/simulate.h"
#include "tests/sim/sim_test_util.h"

namespace zplan::sim {
namespace {

using testing::config;
using testing::ideal_cluster;

constexpr double kPsi = 1'048'576'000;
constexpr double kP = kPsi / 8;  // one rank's partition

models::Model one_tensor_model() {
  return testing::one_tensor_model(static_cast<int64_t>(kPsi));
}

// bf16, micro-batch 1, the given zero_optimization members and top-level additions.
std::string bf16_config(int stage, const std::string& zero_extra, const std::string& top_extra) {
  return R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
             "zero_optimization": {"stage": )" +
         std::to_string(stage) + zero_extra + "}" + top_extra + "}";
}

std::string optimizer_block(const std::string& type, const std::string& params = "{}") {
  return R"(, "zero_allow_untested_optimizer": true, "optimizer": {"type": ")" + type +
         R"(", "params": )" + params + "}";
}

const Workload kTiny{1, Attention::kSdpa};

double states(const MemoryReport& r, Tier tier) {
  return r.phases[0][tier][Category::kOptimizerStates];
}

TEST_CASE("optimizer states per element follow the optimizer block", "[memory][optimizer]") {
  const models::Model model = one_tensor_model();
  const hardware::Cluster cluster = ideal_cluster(8);
  struct Case {
    const char* type;
    const char* params;
    double bytes;  // fp32 states x 4
  };
  // Adam/AdamW: exp_avg and exp_avg_sq; Lion: exp_avg; Adagrad: sum; SGD: momentum_buffer only
  // with momentum != 0; RMSprop: square_avg (+ momentum_buffer).
  const Case cases[] = {{"AdamW", "{}", 8},
                        {"Lion", "{}", 4},
                        {"Adagrad", "{}", 4},
                        {"SGD", R"({"momentum": 0.9})", 4},
                        {"SGD", R"({"lr": 0.1})", 0},
                        {"RMSprop", R"({"momentum": 0.9})", 8}};
  for (const Case& k : cases) {
    INFO(k.type << " " << k.params);
    // Stage 0: every element; stage 2: the partition (ref §2.1 item 3, §2.3).
    const MemoryReport z0 = analyze_memory(
        model, cluster, config(bf16_config(0, "", optimizer_block(k.type, k.params)), 8), kTiny);
    CHECK(states(z0, Tier::kGpu) == Approx(k.bytes * kPsi));
    const MemoryReport z2 = analyze_memory(
        model, cluster, config(bf16_config(2, "", optimizer_block(k.type, k.params)), 8), kTiny);
    CHECK(states(z2, Tier::kGpu) == Approx(k.bytes * kP));
    // The ZeRO paper's model states: 2Ψ params + 2Ψ/N grads + 4Ψ/N master + states/N.
    CHECK(z2.gpu_model_state_bytes == Approx(2 * kPsi + (2 + 4 + k.bytes) * kP));
  }
}

TEST_CASE("offloaded optimizer states follow the CPU optimizer", "[memory][optimizer]") {
  const models::Model model = one_tensor_model();
  const hardware::Cluster cluster = ideal_cluster(8);
  // Stage 3, offload cpu: DeepSpeedCPULion keeps exp_avg in pageable host memory, 4 bytes per
  // partition element, per node 8 ranks.
  const std::string off = R"(, "offload_optimizer": {"device": "cpu"})";
  const MemoryReport lion =
      analyze_memory(model, cluster, config(bf16_config(3, off, optimizer_block("Lion")), 8), kTiny);
  CHECK(states(lion, Tier::kHost) == Approx(8 * 4 * kP));
  CHECK(states(lion, Tier::kGpu) == 0);
  // NVMe: the fp32 parameter, the states and the fp32 gradient, 4 * (2 + 1) bytes (Adam: 16).
  const std::string nvme = R"(, "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"})";
  const MemoryReport lion_nvme = analyze_memory(
      model, cluster, config(bf16_config(3, nvme, optimizer_block("Lion")), 8), kTiny);
  CHECK(lion_nvme[Tier::kNvme].peak_bytes == Approx(8 * 12 * kP));
  const MemoryReport adam_nvme =
      analyze_memory(model, cluster, config(bf16_config(3, nvme, ""), 8), kTiny);
  CHECK(adam_nvme[Tier::kNvme].peak_bytes == Approx(8 * 16 * kP));
}

TEST_CASE("the optimizer step moves the optimizer's own bytes", "[optimizer]") {
  OptimizerConfig adam;
  CHECK(adam.step_bytes() == hardware::kAdamBytesPerParam);  // reads p, g, m, v; writes p, m, v
  CHECK(adam.nvme_in_bytes() == 16);
  CHECK(adam.nvme_out_bytes() == 12);
  OptimizerConfig lion;
  lion.states = 1;
  CHECK(lion.step_bytes() == 20);  // reads p, g, m; writes p, m
  OptimizerConfig sgd;
  sgd.states = 0;
  CHECK(sgd.step_bytes() == 12);  // reads p, g; writes p

  // In the step graph: the GPU optimizer kernel of stage 2 moves (step bytes + 2) per partition
  // element, everything else is the same, so Adam - Lion = 8 bytes x P.
  const models::Model model = one_tensor_model();
  const hardware::Cluster cluster = ideal_cluster(8);
  auto gpu_bytes = [&](const std::string& extra) {
    const StepResult r =
        simulate_step(model, cluster, config(bf16_config(2, "", extra), 8), kTiny);
    return r.bytes_by_kind[static_cast<int>(TaskKind::kOptimizerGpu)];
  };
  CHECK(gpu_bytes("") - gpu_bytes(optimizer_block("Lion")) == Approx(8 * kP));
}

TEST_CASE("torch's foreach Adam: its passes in the step's bytes, its denominator at the peak",
          "[memory][optimizer]") {
  const models::Model model = one_tensor_model();
  const hardware::Cluster cluster = ideal_cluster(8);
  const std::string fused = optimizer_block("AdamW", R"({"torch_adam": true, "fused": true})");
  const std::string foreach = optimizer_block("AdamW", R"({"torch_adam": true})");
  // Stage 2: the foreach update steps the fp32 partition in one call, 80 bytes an element where
  // the fused kernel moves 28 (weight decay 0.01, torch.optim.AdamW's default), and
  // _foreach_sqrt's denominator, 4 bytes an element, lives while it runs.
  const DsConfig c2 = config(bf16_config(2, "", foreach), 8);
  const DsConfig f2 = config(bf16_config(2, "", fused), 8);
  const MemoryReport m2 = analyze_memory(model, cluster, c2, kTiny);
  const MemoryReport n2 = analyze_memory(model, cluster, f2, kTiny);
  CHECK(states(m2, Tier::kGpu) == states(n2, Tier::kGpu));  // the same steady states
  CHECK(m2.phases[2][Tier::kGpu][Category::kOptimizerStates] -
            n2.phases[2][Tier::kGpu][Category::kOptimizerStates] ==
        Approx(4 * kP));
  const StepResult s2 = simulate_step(model, cluster, c2, kTiny);
  const StepResult t2 = simulate_step(model, cluster, f2, kTiny);
  CHECK(s2.bytes_by_kind[static_cast<int>(TaskKind::kOptimizerGpu)] -
            t2.bytes_by_kind[static_cast<int>(TaskKind::kOptimizerGpu)] ==
        Approx((80 - 28) * kP));
  CHECK(s2.step_time_s > t2.step_time_s);
  // Stage 3 steps one sub-group at a time (stage3.py _optimizer_step): the denominator is the
  // largest sub-group's, as is its fp32 gradient (4 bytes an element both).
  const MemoryReport m3 =
      analyze_memory(model, cluster, config(bf16_config(3, "", foreach), 8), kTiny);
  const MemoryReport n3 =
      analyze_memory(model, cluster, config(bf16_config(3, "", fused), 8), kTiny);
  const MemoryBreakdown& step3 = m3.phases[2][Tier::kGpu];
  CHECK(step3[Category::kGrads32] > 0);
  CHECK(step3[Category::kOptimizerStates] -
            n3.phases[2][Tier::kGpu][Category::kOptimizerStates] ==
        Approx(step3[Category::kGrads32]));
  // Without ZeRO the step is the peak (FP16_Optimizer's fp32 copy of every gradient), in the
  // step graph as in the analytic model: the denominator of every element raises both alike.
  const StepResult s0 = simulate_step(model, cluster, config(bf16_config(0, "", foreach), 8), kTiny);
  const StepResult t0 = simulate_step(model, cluster, config(bf16_config(0, "", fused), 8), kTiny);
  const int gpu = static_cast<int>(Tier::kGpu);
  CHECK(s0.peak_bytes[gpu] - t0.peak_bytes[gpu] == Approx(4 * kPsi).epsilon(1e-3));
  CHECK(s0.analytic[Tier::kGpu].peak_bytes - t0.analytic[Tier::kGpu].peak_bytes ==
        Approx(4 * kPsi).epsilon(1e-3));
}

TEST_CASE("DeepSpeed's CPU Lion and Adagrad are DRAM-bound at their own bytes", "[optimizer]") {
  // 64 cores / 8 ranks = 8 threads at 1e8 params/s = 8e8/s; host DRAM 50 GB/s / 8 ranks =
  // 6.25 GB/s: Adam 6.25e9 / 28 = 2.23e8/s, Lion 6.25e9 / 20 = 3.125e8/s (both DRAM-bound).
  hardware::Profile p = testing::ideal_profile();
  p.node.host_memory_bw_bytes_per_s = 50e9;
  p.framework.cpu_oversubscription_efficiency = 1;
  CHECK(hardware::offload_cpu_adam_time_s(p, 1e9, 8) == Approx(1e9 * 28 / 6.25e9));
  CHECK(hardware::offload_cpu_adam_time_s(p, 1e9, 8, 20) == Approx(1e9 * 20 / 6.25e9));
  // With fast DRAM the calibrated Adam rate bounds both (an upper bound for Lion's time).
  p.node.host_memory_bw_bytes_per_s = 1e15;
  CHECK(hardware::offload_cpu_adam_time_s(p, 1e9, 8, 20) == Approx(1e9 / 8e8));
}

TEST_CASE("BF16_Optimizer: a full-size fp32 gradient buffer at stage 1 (defect 3)",
          "[memory][optimizer]") {
  const models::Model model = one_tensor_model();
  const hardware::Cluster cluster = ideal_cluster(8);
  const std::string fp32acc = R"(, "data_types": {"grad_accum_dtype": "fp32"})";
  const DsConfig c = config(bf16_config(1, "", fp32acc), 8);
  REQUIRE(uses_bf16_optimizer(c));
  const MemoryReport r = analyze_memory(model, cluster, c, kTiny);
  // bf16_optimizer.py _setup_for_real_optimizer: bf16 flat 2Ψ, fp32 master partition 4Ψ/8,
  // Adam on it 8Ψ/8, fp32_groups_gradients_flat 4Ψ (zeros_like the whole flat group).
  const MemoryBreakdown& start = r.phases[0][Tier::kGpu];
  CHECK(start[Category::kParams16] == Approx(2 * kPsi));
  CHECK(start[Category::kMaster32] == Approx(4 * kP));
  CHECK(start[Category::kOptimizerStates] == Approx(8 * kP));
  // Model states: + the 16-bit gradients autograd keeps to the step: 2 + 4 + 2 + 1.5 = 9.5Ψ.
  CHECK(r.gpu_model_state_bytes == Approx(2 * kPsi + 4 * kPsi + 2 * kPsi + 12 * kP));
  // Backward at the boundary: the 16-bit gradients and the whole buffer cast to bf16 for the
  // all-reduce (engine.py allreduce_bucket): 9.5Ψ + 2Ψ of buckets.
  const MemoryBreakdown& bwd = r.phases[1][Tier::kGpu];
  CHECK(bwd[Category::kGrads] == Approx(4 * kPsi + 2 * kPsi));
  CHECK(bwd[Category::kBuckets] == Approx(2 * kPsi));
  // The ZeRO-1 optimizer DeepSpeed runs with bf16 accumulation has the same states and 16-bit
  // gradients and no steady fp32 buffer (its 2-byte partition buffer is a backward transient):
  // BF16_Optimizer's model states are 4Ψ more.
  const MemoryReport z1 = analyze_memory(model, cluster, config(bf16_config(1, "", ""), 8), kTiny);
  CHECK(r.gpu_model_state_bytes - z1.gpu_model_state_bytes == Approx(4 * kPsi));

  // The simulated step: one all-reduce of the whole buffer in bf16 at the boundary (no ZeRO
  // buckets), one all-gather of the 16-bit parameters after the step; its peak is the analytic
  // one (the one-layer model's activations are a few KB).
  const StepResult s = simulate_step(model, cluster, c, kTiny);
  CHECK(s.tasks_by_kind[static_cast<int>(TaskKind::kAllReduce)] == 1);
  CHECK(s.bytes_by_kind[static_cast<int>(TaskKind::kAllReduce)] == Approx(2 * kPsi));
  CHECK(s.tasks_by_kind[static_cast<int>(TaskKind::kReduce)] == 0);
  CHECK(s.bytes_by_kind[static_cast<int>(TaskKind::kAllGather)] == Approx(2 * kPsi));
  CHECK(s.peak_bytes[static_cast<int>(Tier::kGpu)] ==
        Approx(r[Tier::kGpu].peak_bytes).epsilon(1e-3));
}

}  // namespace
}  // namespace zplan::sim
