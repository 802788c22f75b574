#include <catch2/catch.hpp>

#include "models/catalog.h"
#include "sim/memory_model.h"
#include "sim/step_builder.h"
#include "sim/step_inputs.h"
#include "tests/sim/sim_test_util.h"

namespace zplan::sim {
namespace {

using testing::config;

std::string stage3(const std::string& extra) {
  return R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
             "zero_optimization": {"stage": 3)" + extra + "}}";
}

TEST_CASE("step inputs count a prefetch window below the inert bound as none", "[sim]") {
  // 1.3b's smallest module fetch is h^2 = 4.2e6 elements, so windows below 3 x 4.2e6 = 1.26e7
  // build the graphs of a window of 0 (StepBuilder::inert_prefetch_window).
  const models::Model model = models::load_model("1.3b");
  const Workload w;
  auto key = [&](const std::string& prefetch) {
    const DsConfig c = config(stage3(R"(, "stage3_prefetch_bucket_size": )" + prefetch), 8, 2048);
    return fingerprint(step_inputs(c, w, zero_sizes(model, 8, c)));
  };
  CHECK(StepBuilder::inert_prefetch_window(zero_sizes(model, 8, config(stage3(""), 8, 2048))) ==
        3 * 2048.0 * 2048.0);
  CHECK(key("1e5") == key("1.2e7"));
  CHECK_FALSE(key("1.2e7") == key("1.3e7"));
  CHECK_FALSE(key("1.3e7") == key("5e7"));
}

TEST_CASE("the step inputs' fingerprint covers the knobs and the workload", "[sim]") {
  const models::Model model = models::load_model("tiny-mlp");
  const DsConfig base = config(stage3(""), 8);
  const ZeroSizes sizes = zero_sizes(model, 8, base);
  const Workload w;
  const GraphFingerprint want = fingerprint(step_inputs(base, w, sizes));
  // What the ds_config writer alone reads does not count.
  DsConfig passthrough = base;
  passthrough.other["steps_per_print"] = 10;
  passthrough.zero.other["elastic_checkpoint"] = true;
  CHECK(fingerprint(step_inputs(passthrough, w, sizes)) == want);
  // Every knob the builder may read does, down to the nested blocks.
  std::vector<DsConfig> changed(6, base);
  changed[0].micro_batch = 2;
  changed[1].zero.overlap_comm = !base.zero.overlap_comm;
  changed[2].zero.offload_param.pin_memory = !base.zero.offload_param.pin_memory;
  changed[3].aio.block_size *= 2;
  changed[4].activation_checkpointing.number_checkpoints = 3;
  changed[5].zero.max_reuse_distance = 7;
  for (size_t i = 0; i < changed.size(); ++i) {
    INFO("change " << i);
    CHECK_FALSE(fingerprint(step_inputs(changed[i], w, sizes)) == want);
  }
  Workload longer;
  longer.seq_len = w.seq_len * 2;
  CHECK_FALSE(fingerprint(step_inputs(base, longer, sizes)) == want);
}

TEST_CASE("zero_sizes' inputs keep the stage-3 knobs for stage 3 only", "[sim]") {
  const models::Model model = models::load_model("tiny-mlp");
  auto sizes_key = [&](int stage, const std::string& extra) {
    const DsConfig c = config(R"({"train_batch_size": 8, "zero_optimization": {"stage": )" +
                                  std::to_string(stage) + extra + "}}",
                              8);
    return fingerprint(sizes_inputs(8, c));
  };
  CHECK(sizes_key(2, "") == sizes_key(2, R"(, "sub_group_size": 1e3)"));
  CHECK_FALSE(sizes_key(3, "") == sizes_key(3, R"(, "sub_group_size": 1e3)"));
  CHECK_FALSE(sizes_key(2, "") == sizes_key(2, R"(, "reduce_bucket_size": 1e3)"));
  // And zero_sizes does read the stage-3 knob it keeps.
  const DsConfig small = config(stage3(R"(, "sub_group_size": 1e3)"), 8);
  const DsConfig big = config(stage3(""), 8);
  CHECK(zero_sizes(model, 8, small).sub_groups > zero_sizes(model, 8, big).sub_groups);
}

}  // namespace
}  // namespace zplan::sim
