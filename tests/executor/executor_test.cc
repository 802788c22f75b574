// The reference executor: its layout agrees with the builder's sizes, every ZeRO stage and offload
// mode trains an MLP to the same weights, its measured memory is the simulated memory, and ranks
// that stop answering make the others fail instead of hang. Ranks run as threads (the thread
// communicator); tests/executor/validate_test.cc runs the real thing under mpirun.
#include "executor/executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include <catch2/catch.hpp>

#include "executor/layout.h"
#include "executor/validate.h"
#include "models/input_error.h"
#include "sim/step_builder.h"
#include "tests/executor/executor_test_util.h"

namespace zplan::executor {
namespace {

using nlohmann::json;
using testing::cpu_test_profile;
using testing::ds_config;
using testing::run_ranks;

constexpr int kRanks = 2;
// Rows per optimizer step, split over ranks and micro-steps the same way for every config.
constexpr int kGlobalBatch = 32;

std::string temp_dir() {
  const char* t = std::getenv("TMPDIR");
  return t != nullptr && t[0] != '\0' ? t : "/tmp";
}

// A ds_config for the MLP tests: small buckets (several per step, and tensors larger than a
// bucket), stage-3 knobs that gather every weight again in backward and split the optimizer into
// sub-groups.
json mlp_config(int stage, int gas, const std::string& offload, bool offload_params = false,
                int64_t bucket = 100000) {
  json z = {{"stage", stage}, {"reduce_bucket_size", bucket}};
  if (stage == 3) {
    z["stage3_param_persistence_threshold"] = 1000;
    z["stage3_max_reuse_distance"] = 0;
    z["stage3_prefetch_bucket_size"] = 70000;
    z["sub_group_size"] = 100000;
  }
  if (offload != "none") {
    z["offload_optimizer"] = {{"device", offload}};
    if (offload == "nvme") z["offload_optimizer"]["nvme_path"] = temp_dir();
  }
  if (offload_params) z["offload_param"] = {{"device", "cpu"}};
  return {{"train_batch_size", kGlobalBatch},
          {"gradient_accumulation_steps", gas},
          {"zero_optimization", z}};
}

struct Run {
  ExecutionResult result;
  std::vector<float> weights;
};

Run execute(const models::Model& model, const json& config_json, int steps = 3) {
  const hardware::Cluster cluster = hardware::make_cluster(cpu_test_profile(), kRanks, 1);
  const sim::DsConfig config = ds_config(config_json, kRanks);
  sim::Workload workload;
  workload.seq_len = model.shape().default_seq_len;
  std::vector<ExecutionResult> results(kRanks);
  run_ranks(kRanks, [&](int rank, ExecutorDevice& device) {
    ExecuteOptions o;
    o.warmup_steps = 0;
    o.steps = steps;
    o.keep_weights = true;
    results[static_cast<size_t>(rank)] = execute_steps(model, cluster, config, workload, device, o);
  });
  Run run;
  run.weights = results[0].weights;
  // Every rank ends with the same full parameters.
  REQUIRE(results[1].weights == run.weights);
  run.result = std::move(results[0]);
  return run;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(double(a[i]) - b[i]));
  return d;
}

TEST_CASE("executor layout agrees with the builder's ZeRO sizes", "[executor]") {
  const models::Model model = models::load_model("tiny-mlp-s");
  const hardware::Cluster cluster = hardware::make_cluster(cpu_test_profile(), kRanks, 1);
  sim::Workload w;
  w.seq_len = 1;
  for (int stage : {1, 2, 3}) {
    const sim::DsConfig config = ds_config(mlp_config(stage, 1, "none"), kRanks);
    sim::StepBuilder builder(model, cluster, config, w);
    for (int rank = 0; rank < kRanks; ++rank) {
      ExecutorLayout layout(model, config, builder, kRanks, rank);
      CHECK(static_cast<double>(layout.partition()) == builder.sizes().partition);
      // Every gradient in exactly one bucket; buckets in the builder's order and sizes.
      int64_t in_buckets = 0;
      for (const BucketSlots& b : layout.buckets()) in_buckets += b.elems;
      CHECK(in_buckets == layout.psi());
      for (const ParamSlot& p : layout.params()) CHECK(p.bucket >= 0);
      if (stage == 3) {
        // 4 weights of 256 x 256 split in 2, 4 biases of 256 (persistent, threshold 1000):
        // 4 x (32768 + 128) = 131584 elements per rank, sub-groups of >= 100000.
        CHECK(layout.partition() == 131584);
        CHECK(layout.persistent_elems() == 4 * 256);
        CHECK(layout.sub_groups().size() == 2);
      } else {
        // 263168 parameters padded to a multiple of 2 x 2 = 4 (already one), halved.
        CHECK(layout.partition() == 131584);
        CHECK(layout.partition_begin() == rank * 131584);
      }
    }
  }
}

// The numerics test: after three optimizer steps on the same data, every stage and offload mode
// ends with the same weights as plain data parallelism, within fp32 rounding. The weights are
// O(0.06) and Adam moves each by at most lr = 1e-3 per step; sums of gradients in another order
// differ in the last bits, and Adam's m / sqrt(v) passes those differences on at most at the scale
// of lr times the relative rounding (~1e-7), so 1e-6 leaves room without hiding a wrong slice (a
// missing or doubled gradient moves weights by ~1e-3).
TEST_CASE("every ZeRO stage and offload mode trains the MLP to the same weights", "[executor]") {
  const models::Model model = models::load_model("tiny-mlp-s");
  const Run reference = execute(model, mlp_config(0, 1, "none"));
  // The model learns: the loss goes down over the steps.
  REQUIRE(reference.result.loss.size() == 3);
  CHECK(reference.result.loss[2] < reference.result.loss[0]);
  constexpr double kTolerance = 1e-6;
  struct Case {
    int stage;
    int gas;
    std::string offload;
    bool offload_params;
    int64_t bucket;
  };
  const std::vector<Case> cases = {
      {0, 2, "none", false, 100000}, {0, 4, "none", false, 100000}, {1, 1, "none", false, 100000},
      {1, 2, "none", false, 50000},  {2, 1, "none", false, 100000}, {2, 4, "none", false, 50000},
      {3, 1, "none", false, 100000}, {3, 2, "none", false, 100000}, {1, 1, "cpu", false, 100000},
      {1, 4, "cpu", false, 100000},  {2, 1, "cpu", false, 100000},  {2, 2, "cpu", false, 50000},
      {3, 1, "cpu", false, 100000},  {3, 4, "cpu", false, 100000},  {3, 2, "cpu", true, 100000},
      {3, 1, "nvme", false, 100000}, {3, 2, "nvme", false, 100000},
  };
  for (const Case& c : cases) {
    INFO("stage " << c.stage << " gas " << c.gas << " offload " << c.offload
                  << (c.offload_params ? " + params" : "") << " bucket " << c.bucket);
    const Run run =
        execute(model, mlp_config(c.stage, c.gas, c.offload, c.offload_params, c.bucket));
    const double diff = max_abs_diff(run.weights, reference.weights);
    CHECK(diff <= kTolerance);
    // The same loss, step by step (the same data and weights, within rounding).
    for (size_t s = 0; s < run.result.loss.size(); ++s) {
      CHECK(run.result.loss[s] == Approx(reference.result.loss[s]).epsilon(1e-5));
    }
  }
}

struct MemoryCase {
  int stage;
  int gas;
  std::string offload;
  int64_t bucket;
};

void check_memory(const std::vector<MemoryCase>& cases) {
  const models::Model model = models::load_model("tiny-mlp-s");
  const hardware::Cluster cluster = hardware::make_cluster(cpu_test_profile(), kRanks, 1);
  sim::Workload w;
  w.seq_len = 1;
  for (const MemoryCase& c : cases) {
    INFO("stage " << c.stage << " gas " << c.gas << " offload " << c.offload << " bucket "
                  << c.bucket);
    const sim::DsConfig config =
        ds_config(mlp_config(c.stage, c.gas, c.offload, false, c.bucket), kRanks);
    std::vector<ValidationReport> reports(kRanks);
    run_ranks(kRanks, [&](int rank, ExecutorDevice& device) {
      ValidateOptions o;
      o.execute.warmup_steps = 1;
      o.execute.steps = 1;
      reports[static_cast<size_t>(rank)] = validate(model, cluster, config, w, device, o);
    });
    REQUIRE_FALSE(reports[0].memory.empty());
    // The executor's resources are threads: which allocations overlap at the peak depends a
    // little on their timing (an NVMe swap-in against the release of a gathered module, a
    // prefetch against a backward), and the simulated schedule is one of those interleavings.
    // On this tiny model one 256 x 256 weight is 3-10% of the peak, so the check allows 3% or
    // one such tensor above the prediction, whichever is larger. Below it, more: on a loaded
    // machine (ctest -j2 on two cores) the all-gather thread starves, compute waits for each
    // gather after the previous module is released, and the peak drops by up to ~1.2 tensors
    // (seen: 295 KB); the prediction is then the upper bound a planner needs.
    // docs/validation.md checks 3% either way at real sizes on a quiet machine.
    const double one_tensor = 256.0 * 256.0 * 4;
    for (const ValidationRow& row : reports[0].memory) {
      INFO(row.name << ": predicted " << row.predicted << " measured " << row.measured);
      CHECK(row.measured - row.predicted <= std::max(0.03 * row.predicted, one_tensor));
      CHECK(row.predicted - row.measured <= std::max(0.03 * row.predicted, 2 * one_tensor));
    }
    // Every graph of the step was measured: the micro-steps and the optimizer step.
    CHECK(reports[0].measured.micro_steps.size() == static_cast<size_t>(c.gas) + 1);
  }
}

TEST_CASE("executed memory peaks match the simulated ones", "[executor]") {
  // Memory is deterministic (unlike time): the tracking allocator's peak per tier must be the
  // simulator's within 3% for each stage and offload mode. Stages 1-2 use one bucket here (see
  // the next case for several).
  check_memory({{0, 1, "none", 100000},
                {1, 2, "none", 300000},
                {2, 2, "none", 300000},
                {2, 1, "cpu", 300000},
                {3, 2, "none", 100000},
                {3, 2, "cpu", 100000},
                {3, 1, "nvme", 100000}});
}

// Several buckets in stage 2: the gradient that overflows a bucket stays allocated until the full
// bucket has left the IPG buffer (DeepSpeed's hook runs reduce_ipg_grads() before it copies the
// new gradient in) -- after the reduction, or with offload after the copies to the host.
TEST_CASE("memory with several buckets per backward", "[executor]") {
  check_memory({{2, 2, "none", 100000}, {2, 1, "cpu", 100000}});
}

TEST_CASE("transformer-shaped models run with their shapes", "[executor]") {
  const models::Model model = models::load_model("tiny-gpt");
  const hardware::Cluster cluster = hardware::make_cluster(cpu_test_profile(), kRanks, 1);
  sim::Workload w;
  w.seq_len = 32;
  for (int stage : {0, 2, 3}) {
    INFO("stage " << stage);
    json j = {{"train_micro_batch_size_per_gpu", 1},
              {"zero_optimization", {{"stage", stage}, {"reduce_bucket_size", 500000}}}};
    const sim::DsConfig config = ds_config(j, kRanks);
    std::vector<ValidationReport> reports(kRanks);
    run_ranks(kRanks, [&](int rank, ExecutorDevice& device) {
      ValidateOptions o;
      o.execute.warmup_steps = 0;
      o.execute.steps = 1;
      reports[static_cast<size_t>(rank)] = validate(model, cluster, config, w, device, o);
    });
    REQUIRE(reports[0].measured.step_time_s > 0);
    for (const ValidationRow& row : reports[0].memory) {
      INFO(row.name << ": predicted " << row.predicted << " measured " << row.measured);
      CHECK(std::fabs(row.error()) <= 0.03);
    }
  }
}

TEST_CASE("the executor refuses what it does not run", "[executor]") {
  const models::Model model = models::load_model("tiny-mlp-s");
  const hardware::Cluster cluster = hardware::make_cluster(cpu_test_profile(), kRanks, 1);
  sim::Workload w;
  w.seq_len = 1;
  json bf16 = mlp_config(2, 1, "none");
  bf16["bf16"] = {{"enabled", true}};
  const sim::DsConfig config = ds_config(bf16, kRanks);
  CHECK_THROWS_AS(run_ranks(kRanks,
                            [&](int, ExecutorDevice& device) {
                              execute_steps(model, cluster, config, w, device, ExecuteOptions{});
                            }),
                  InputError);
}

}  // namespace
}  // namespace zplan::executor
