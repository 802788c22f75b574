// The planner honours frozen parameters and LoRA (models/finetune.h): the rank and targets are the
// user's, not searched, but the smaller optimizer footprint changes which configs fit and win.
#include <catch2/catch.hpp>

#include "models/finetune.h"
#include "tests/planner/planner_test_util.h"

namespace zplan::planner {
namespace {

using testing::knobs;
using testing::problem;

TEST_CASE("plan with LoRA fits llama3-8b on one 80 GB GPU without offload, full FT cannot",
          "[planner]") {
  Problem full = problem("llama3-8b", "a100", 1, 2048);
  Problem lora = full;
  models::FineTune ft;
  ft.lora_rank = 16;
  ft.lora_targets = models::parse_lora_targets(models::kDefaultLoraTargets);
  lora.model = models::apply_finetune(full.model, ft);
  const KnobRequest k = knobs({{Knob::kMicroBatch, "1,2"}});
  const PlanResult a = testing::run_plan_2t(full, k);
  const PlanResult b = testing::run_plan_2t(lora, k);
  // Full fine-tuning: 16 bytes per parameter of model states (128 GB) on one GPU, so only an
  // offloaded optimizer fits, if anything does.
  if (a.recommended_config) {
    CHECK(a.recommended_config->zero.offload_optimizer.device != sim::OffloadDevice::kNone);
  }
  // LoRA: 16 GB of bf16 weights and 0.1 GB of adapter states: no offload needed.
  REQUIRE(b.recommended_config);
  CHECK(b.recommended_config->zero.offload_optimizer.device == sim::OffloadDevice::kNone);
  CHECK(b.recommended_config->zero.offload_param.device == sim::OffloadDevice::kNone);
  // The plan says LoRA was assumed; the ds_config has no key for it.
  bool said = false;
  for (const std::string& line : b.needs) {
    said = said || line.find("LoRA rank 16") != std::string::npos;
  }
  CHECK(said);
}

}  // namespace
}  // namespace zplan::planner
