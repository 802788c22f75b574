// TraceWriter: a simulated step as Chrome trace-event JSON, which Perfetto (ui.perfetto.dev) and
// chrome://tracing open: one track per resource, a named slice per task (layer, module or
// bucket, bytes), and counter tracks of memory per tier.
//
// Output is deterministic: events in simulation order, times in microseconds with three decimals
// (nanosecond resolution), so the same inputs give byte-identical files.
#ifndef ZPLAN_SIM_TRACE_WRITER_H_
#define ZPLAN_SIM_TRACE_WRITER_H_

#include <string>

#include "models/model.h"
#include "sim/engine.h"
#include "sim/step_graph.h"

namespace zplan::sim {

class TraceWriter {
 public:
  // Keeps a reference to `model` (for layer and module names).
  explicit TraceWriter(const models::Model& model);

  // Appends one simulated micro-step whose time zero is `offset_s` into the step. Host-tier
  // memory is per rank in the graph; `ranks_per_node` scales it to the node, as reports do.
  void add(const StepGraph& graph, const EngineResult& result, double offset_s,
           double ranks_per_node);
  void finish() {}

  // The whole trace document.
  std::string json() const;

  // The name a task gets in the trace, e.g. "all_gather layers.3 mlp.c_fc 113.2 MB".
  std::string task_name(const Task& task) const;

 private:
  const models::Model& model_;
  std::string events_;  // comma-separated event objects
  bool any_ = false;
};

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_TRACE_WRITER_H_
