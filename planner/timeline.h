// StepTimeline: what each resource of one rank does during an optimizer step of one config, as
// the report draws it -- captured from the simulator's per-micro-step observer.
//
// A step has `gas` micro-steps, then the optimizer step (engine.step()); the micro-steps look
// alike but for the first and the boundary one, so the timeline keeps the first micro-step and
// the last one joined with the optimizer step: every task's resource, kind and start/end in
// seconds from the part's start, and the GPU memory curve.
#ifndef ZPLAN_PLANNER_TIMELINE_H_
#define ZPLAN_PLANNER_TIMELINE_H_

#include <vector>

#include "planner/search_space.h"
#include "sim/simulate.h"

namespace zplan::planner {

struct TimelineTask {
  double start_s = 0;  // from the micro-step's start
  double end_s = 0;
  sim::Resource resource = sim::Resource::kCompute;
  sim::TaskKind kind = sim::TaskKind::kForward;
  int layer = -1;
};

struct MicroStepTimeline {
  int micro_step = 0;     // 0-based
  double offset_s = 0;    // where it starts within the optimizer step
  double duration_s = 0;  // including the optimizer step when it has one
  bool with_optimizer = false;
  double optimizer_start_s = 0;  // where the optimizer step starts, with_optimizer
  std::vector<TimelineTask> tasks;
  // GPU memory per GPU after each instant that changed it: (seconds, bytes).
  std::vector<std::pair<double, double>> gpu_bytes;
};

struct StepTimeline {
  int gas = 1;
  double step_time_s = 0;
  // The first micro-step (if gas > 1), and the last one with the optimizer step.
  std::vector<MicroStepTimeline> shown;
};

// Simulates `config` once more, observing every micro-step.
// REQUIRES: config passed validate_ds_config for problem.cluster.gpus.
StepTimeline capture_timeline(const Problem& problem, const sim::DsConfig& config);

}  // namespace zplan::planner

#endif  // ZPLAN_PLANNER_TIMELINE_H_
