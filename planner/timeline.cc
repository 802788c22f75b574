#include "planner/timeline.h"

namespace zplan::planner {

StepTimeline capture_timeline(const Problem& problem, const sim::DsConfig& config) {
  StepTimeline t;
  t.gas = static_cast<int>(config.gradient_accumulation_steps);
  int seen = 0;
  auto append = [](const sim::StepGraph& graph, const sim::EngineResult& result, double shift,
                   MicroStepTimeline* m) {
    const auto& tasks = graph.tasks();
    for (size_t i = 0; i < tasks.size(); ++i) {
      m->tasks.push_back({shift + sim::to_seconds(result.timing[i].start),
                          shift + sim::to_seconds(result.timing[i].end), tasks[i].resource,
                          tasks[i].kind, tasks[i].layer});
    }
    const int gpu = static_cast<int>(sim::Tier::kGpu);
    for (const sim::MemorySample& s : result.samples) {
      m->gpu_bytes.emplace_back(shift + sim::to_seconds(s.at), s.bytes[gpu]);
    }
  };
  // Calls 0 .. gas-1 are the micro-steps, call `gas` the optimizer step.
  sim::SimulateOptions options;
  options.analytic_memory = false;
  options.observer = [&](const sim::StepGraph& graph, const sim::EngineResult& result,
                         double offset_s) {
    const int call = seen++;
    const double duration = sim::to_seconds(result.end);
    if (call == t.gas) {
      MicroStepTimeline& last = t.shown.back();
      last.with_optimizer = true;
      last.optimizer_start_s = offset_s - last.offset_s;
      append(graph, result, last.optimizer_start_s, &last);
      last.duration_s = last.optimizer_start_s + duration;
      return;
    }
    if (call != 0 && call != t.gas - 1) return;
    MicroStepTimeline m;
    m.micro_step = call;
    m.offset_s = offset_s;
    m.duration_s = duration;
    append(graph, result, 0, &m);
    t.shown.push_back(std::move(m));
  };
  sim::StepResult r =
      sim::simulate_step(problem.model, problem.cluster, config, problem.workload, options);
  t.step_time_s = r.step_time_s;
  return t;
}

}  // namespace zplan::planner
