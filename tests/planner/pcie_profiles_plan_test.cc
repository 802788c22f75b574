// The planner on the PCIe stock profiles (hardware/{l4,a10g,rtx4090,l40s}.json): the verdicts
// users know -- a 7B full fine-tune does not fit on one 24 GB GPU without offload (16 bytes of
// model states per parameter alone are 108 GB) but does with ZeRO-Offload, and Llama-3-8B trains
// on one 8x L40S node without offload.
#include "planner/plan.h"

#include <catch2/catch.hpp>

#include "tests/planner/planner_test_util.h"

namespace zplan::planner {
namespace {

using testing::knobs;
using testing::problem;

PlanResult run_plan(const Problem& p, const KnobRequest& k) {
  PlanOptions o;
  o.eval.threads = 2;
  return plan(p, k, {}, o);
}

TEST_CASE("a 7B full fine-tune fits one 24 GB GPU only with offload", "[planner]") {
  for (const char* hw : {"l4", "a10g", "rtx4090"}) {
    INFO(hw);
    Problem p = problem("llama2-7b", hw, 1);
    PlanResult none = run_plan(p, knobs({{Knob::kMicroBatch, "1,2"},
                                         {Knob::kOffloadOptimizer, "none"},
                                         {Knob::kOffloadParam, "none"}}));
    CHECK_FALSE(none.recommended);
    CHECK(none.search.stats.fitting == 0);
    PlanResult any = run_plan(p, knobs({{Knob::kMicroBatch, "1,2"}}));
    REQUIRE(any.recommended);
    const Candidate& c = any.search.candidates[*any.recommended];
    CHECK(c.offload_optimizer() != sim::OffloadDevice::kNone);
  }
}

TEST_CASE("Llama-3-8B trains on one 8x L40S node without offload", "[planner]") {
  Problem p = problem("llama3-8b", "l40s", 8);
  PlanResult r = run_plan(p, knobs({{Knob::kMicroBatch, "1,2"}}));
  REQUIRE(r.recommended);
  const Candidate& c = r.search.candidates[*r.recommended];
  CHECK(c.offload_optimizer() == sim::OffloadDevice::kNone);
  CHECK(r.search.evals[*r.recommended].fits());
}

}  // namespace
}  // namespace zplan::planner
