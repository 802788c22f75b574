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
//
// Periodic regions (StepGraph::periodic_regions) are where most of a step's tasks are: the same
// layer, again and again. Each time a region's anchor task (its first task, and its copies one
// period apart) starts, the engine takes a snapshot of its state at the end of that instant: the
// tasks from the first one not ended to the last one touched, the pending events, the resources,
// the links and the memory. When a snapshot equals the previous one shifted by one period in task
// ids and by some time D in the clock -- memory may grow by the same amount each period -- the
// simulation has reached a steady state: everything the next period does is what the last one did,
// shifted. The engine then copies the last period's task timings forward over as many whole periods
// as stay inside the region, shifts its state by as many periods, and carries on. Every figure
// (times, critical-path links, memory peaks, event counts) is the one simulating every task gives,
// bit for bit: times are integers, the state is compared exactly, and memory is only extrapolated
// when every amount is a sum double computes exactly (sim/periodic.h). A layer whose parts run at
// different rates with nothing to hold the fast ones back (copies falling further behind every
// layer) never repeats its state, and is simulated task by task.
//
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
  uint64_t shuffle_seed = 0;   // != 0: shuffle equal-time events (tests)
  bool record_memory = false;  // keep a sample of every tier after each instant that changed it
  // Jump over the repeats of a periodic region once the simulation of it has reached a steady
  // state (see Simulator). The result is the same either way; false simulates every task (tests
  // compare the two). Off with shuffle_seed or record_memory.
  bool skip_periods = true;
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
  uint64_t events = 0;                // events handled, counting those of skipped repeats
  size_t skipped_tasks = 0;           // tasks whose timing was copied from a repeat, not simulated
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

  // Periodic skipping (engine_periodic.cc).
  enum TaskState : uint8_t { kUntouched = 0, kTouched = 1, kRunning = 2, kEnded = 3 };
  struct TaskSnap {
    uint8_t state;
    uint8_t due;
    uint32_t deps_left;
    TaskId last_dep;
    SimTime last_dep_end;
    double remaining;
  };
  struct ResourceSnap {
    bool fixed;  // idle, with nothing left in the region: stays as it is
    size_t head;
    TaskId head_task, running, previous;
    SimTime previous_end;
  };
  struct Snapshot {
    int region = -1;
    TaskId anchor = 0;
    SimTime at;
    TaskId lo = 0, hi = 0;
    uint64_t events = 0;
    std::vector<TaskSnap> tasks;  // [lo, hi)
    std::vector<Event> pending;
    std::array<ResourceSnap, kNumResources> resources;
    std::array<std::vector<TaskId>, kNumLinkSlots> links;
    std::array<SimTime, kNumLinkSlots> link_updated;
    std::array<MemoryBreakdown, kNumTiers> memory;
    int comm_active = 0;
    double compute_rate = 1;
    SimTime compute_updated;
  };
  void start_tracking(const EngineOptions& options);
  // Fills *s; false (and *s unusable) when its window is too long to compare.
  bool take_snapshot(Snapshot* s);
  // Compares the snapshot just taken with the previous one; returns how many periods to skip.
  int64_t periods_to_skip(const Snapshot& prev, const Snapshot& cur) const;
  void skip(const Snapshot& prev, const Snapshot& cur, int64_t periods);
  void at_instant_end();  // takes a snapshot if an anchor started this instant, maybe skips
  void reset_period_record();

  bool tracking_ = false;
  std::vector<uint8_t> state_;   // TaskState of each task
  std::vector<uint8_t> anchor_;  // region index + 1 at each region's anchors, else 0
  TaskId lo_ = 0;                // every task below has ended
  TaskId hi_ = 0;                // every task from here on is untouched
  int due_region_ = -1;          // an anchor of this region started in this instant
  TaskId due_anchor_ = 0;
  std::array<Snapshot, 2> snaps_;
  int last_snap_ = -1;  // index into snaps_ of the previous snapshot, or -1
  // Since the previous snapshot: tasks started, tasks ended, and each tier's highest total.
  std::vector<TaskId> started_;
  std::vector<TaskId> ended_list_;
  std::array<bool, kNumTiers> period_peak_valid_{};
  std::array<double, kNumTiers> period_peak_{};
  std::array<MemoryBreakdown, kNumTiers> period_peak_at_{};
  std::array<SimTime, kNumTiers> period_peak_time_{};

  const StepGraph* graph_ = nullptr;
  EngineResult* result_ = nullptr;
  bool record_memory_ = false;
  EventQueue queue_;
  SimTime now_{};
  std::vector<uint32_t> deps_left_;
  std::vector<uint8_t> due_kind_;  // what each task's pending event is
  std::vector<double> remaining_;  // bandwidth work left at the full link rate, seconds
  std::vector<TaskId> last_dep_;
  std::array<size_t, kNumResources> head_{};  // next task in each resource's order
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
