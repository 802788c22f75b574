// Simulator: the discrete-event interpreter of a StepGraph on a simulated clock.
//
// It follows the semantics written in sim/step_graph.h: resources run their tasks one at a time
// in program order once dependencies have ended; a task spends latency_s and then work_s on its
// link, sharing the link equally with the other tasks on it at the same moment; memory effects
// apply at task start and end. Events are kept in an EventQueue ordered by (time, sequence).
//
// All events of one instant are processed before any task starts at that instant, and memory is
// measured only once the instant is over, so neither the step time nor the memory peak depends on
// the order of equal-time events (tested with the queue's shuffle mode). Each task has at most one
// pending event (its latency ending, or its end); rescheduling moves it.
// A compute task runs as a flow of its own whose rate drops to 1 - comm_compute_slowdown while
// any collective runs on another stream; its remaining work is tracked like a link flow's.
// A Simulator keeps its buffers between runs: reuse one to simulate many graphs without
// allocating (the planner does). Not thread-safe; use one per thread.
#ifndef ZPLAN_SIM_ENGINE_H_
#define ZPLAN_SIM_ENGINE_H_

#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "sim/event_queue.h"
#include "sim/step_graph.h"

namespace zplan::sim {

inline constexpr TaskId kNoTask = std::numeric_limits<TaskId>::max();

struct EngineOptions {
  uint64_t shuffle_seed = 0;    // != 0: shuffle equal-time events (tests)
  bool record_memory = false;   // keep a sample of every tier after each instant that changed it
};

struct TaskTiming {
  SimTime start;
  SimTime end;
  // The task whose end let this one start last (a dependency, or the task before it on its
  // resource); kNoTask if it could start at time zero. Following these links backwards from the
  // last task gives the critical path.
  TaskId released_by = kNoTask;
};

struct MemorySample {
  SimTime at;
  std::array<double, kNumTiers> bytes{};
};

struct EngineResult {
  SimTime end;  // when the last task ended
  std::vector<TaskTiming> timing;
  std::array<double, kNumTiers> peak{};
  std::array<MemoryBreakdown, kNumTiers> at_peak{};
  std::array<SimTime, kNumTiers> peak_at{};
  std::array<MemoryBreakdown, kNumTiers> final_memory{};
  std::vector<MemorySample> samples;  // with record_memory
  uint64_t events = 0;
};

class Simulator {
 public:
  // Runs `graph` from time zero until every task has ended; fills *result.
  // A graph whose resource orders contradict its dependencies deadlocks; that is a builder bug
  // and fails an assertion.
  void run(const StepGraph& graph, const EngineOptions& options, EngineResult* result);

 private:
  enum EventKind : uint8_t { kLatencyDone = 0, kBandwidthDone = 1 };
  // Schedules target's next event (replacing any pending one).
  void schedule(TaskId target, SimTime at, EventKind kind) {
    due_kind_[target] = kind;
    queue_.schedule(target, at);
  }

  void start_task(TaskId id);
  void end_task(TaskId id);
  void apply_effects(const Task& t, bool at_end);
  void join_link(TaskId id);
  void leave_link(TaskId id);
  void advance_link(int link);
  void reschedule_link(int link);
  void start_ready();
  void close_instant();
  void set_comm_active(int delta);
  void schedule_compute(TaskId c);  // (re)schedules the running compute task's end

  const StepGraph* graph_ = nullptr;
  EngineResult* result_ = nullptr;
  bool record_memory_ = false;
  EventQueue queue_;
  SimTime now_{};
  std::vector<uint32_t> deps_left_;
  std::vector<uint8_t> due_kind_;  // what each task's pending event is
  std::vector<double> remaining_;  // bandwidth work left at the full link rate, seconds
  std::vector<TaskId> last_dep_;
  std::array<size_t, kNumResources> head_{};   // next task in each resource's order
  std::array<TaskId, kNumResources> running_{};
  std::array<TaskId, kNumResources> previous_{};  // last task that ran on each resource
  uint32_t dirty_ = 0;  // bit r: resource r may be able to start its next task
  struct LinkState {
    std::vector<TaskId> active;
    SimTime updated;
  };
  std::array<LinkState, kNumLinkSlots> links_;
  std::array<MemoryBreakdown, kNumTiers> memory_{};
  // Contention between compute and collectives on other streams.
  int comm_active_ = 0;
  double compute_rate_ = 1;  // progress per second of the running compute task
  SimTime compute_updated_{};
  bool memory_changed_ = false;
  std::array<bool, kNumTiers> tier_changed_{};
  size_t ended_ = 0;
};

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_ENGINE_H_
