// Helpers for the planner tests: a Problem from a preset, a stock profile and a GPU count.
#ifndef ZPLAN_TESTS_PLANNER_PLANNER_TEST_UTIL_H_
#define ZPLAN_TESTS_PLANNER_PLANNER_TEST_UTIL_H_

#include <string>

#include "hardware/profile.h"
#include "models/catalog.h"
#include "planner/plan.h"
#include "planner/search_space.h"

namespace zplan::planner::testing {

inline Problem problem(const std::string& model, const std::string& hw, int gpus,
                       int64_t seq_len = 0) {
  Problem p{models::load_model(model),
            hardware::make_cluster(hardware::load_profile(hw), gpus, (gpus + 7) / 8),
            {},
            sim::Precision::kBf16,
            "/local_nvme",
            0.05};
  p.workload.seq_len = seq_len > 0 ? seq_len : p.model.shape().default_seq_len;
  return p;
}

inline KnobRequest knobs(std::initializer_list<std::pair<Knob, const char*>> lists) {
  KnobRequest r;
  for (const auto& [k, text] : lists) r.set_from_text(k, text);
  return r;
}

// plan() on two threads with default options.
inline PlanResult run_plan_2t(const Problem& p, const KnobRequest& k) {
  PlanOptions o;
  o.eval.threads = 2;
  return plan(p, k, {}, o);
}

}  // namespace zplan::planner::testing

#endif  // ZPLAN_TESTS_PLANNER_PLANNER_TEST_UTIL_H_
