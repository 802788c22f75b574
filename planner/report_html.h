// The HTML report of a plan or a sweep: one self-contained file (inline CSS and SVG, nothing
// fetched, no scripts) with
//  * the recommended (plan) or fastest (sweep) configuration, its numbers and why it wins;
//  * every simulated configuration as throughput against peak GPU memory, the Pareto front
//    highlighted, the GPU capacity and the usable capacity (after headroom) marked;
//  * the GPU memory breakdown of the top configurations, stacked by category;
//  * the chosen configuration's timeline: one lane per resource, tasks colored by kind, for the
//    first and the last micro-step (the last also runs the optimizer step), with GPU memory.
// The output is a pure function of its inputs (no dates, no timings), like every zplan output.
#ifndef ZPLAN_PLANNER_REPORT_HTML_H_
#define ZPLAN_PLANNER_REPORT_HTML_H_

#include <optional>
#include <string>
#include <vector>

#include "planner/plan.h"
#include "planner/timeline.h"

namespace zplan::planner {

struct ReportInput {
  const Problem* problem = nullptr;
  const SearchResult* search = nullptr;
  const PlanResult* plan = nullptr;        // for a plan: why, alternatives, needs; else nullptr
  std::optional<size_t> chosen;            // the config whose details and timeline are shown
  const StepTimeline* timeline = nullptr;  // of `chosen`
  std::string title;                       // "zplan plan: 20b on 8 x A100-SXM4-80GB"
  std::string ds_config_json;              // of `chosen`, pretty-printed (may be empty)
};

std::string render_report_html(const ReportInput& input);

}  // namespace zplan::planner

#endif  // ZPLAN_PLANNER_REPORT_HTML_H_
