#include "sim/engine.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstdlib>

namespace zplan::sim {

void Simulator::run(const StepGraph& graph, const EngineOptions& options, EngineResult* result) {
  assert(graph.finalized());
  graph_ = &graph;
  result_ = result;
  record_memory_ = options.record_memory;
  queue_.reset(static_cast<uint32_t>(graph.tasks().size()), options.shuffle_seed);
  const auto& tasks = graph.tasks();
  const size_t n = tasks.size();
  now_ = SimTime{};
  deps_left_.assign(graph.in_degree().begin(), graph.in_degree().end());
  due_kind_.assign(n, kBandwidthDone);
  remaining_.assign(n, 0.0);
  last_dep_.assign(n, kNoTask);
  head_.fill(0);
  running_.fill(kNoTask);
  previous_.fill(kNoTask);
  dirty_ = (1u << kNumResources) - 1;
  for (LinkState& l : links_) {
    l.active.clear();
    l.updated = SimTime{};
  }
  memory_ = graph.baseline;
  memory_changed_ = true;
  tier_changed_.fill(true);
  ended_ = 0;
  comm_active_ = 0;
  compute_rate_ = 1;
  compute_updated_ = SimTime{};

  result->timing.assign(n, TaskTiming{});
  result->events = 0;
  result->skipped_tasks = 0;
  result->samples.clear();
  for (int t = 0; t < kNumTiers; ++t) {
    result->peak[t] = memory_[t].total();
    result->at_peak[t] = memory_[t];
    result->peak_at[t] = SimTime{};
  }
  start_tracking(options);

  start_ready();
  while (!queue_.empty()) {
    if (queue_.top_time() > now_) {
      close_instant();
      if (due_region_ >= 0) at_instant_end();  // may move the queue and the clock forward
      now_ = queue_.top_time();
    }
    Event e = queue_.pop();
    ++result->events;
    const Task& t = tasks[e.target];
    if (due_kind_[e.target] == kLatencyDone) {
      join_link(e.target);
    } else {
      if (t.link != LinkSlot::kNone && t.work_s > 0) leave_link(e.target);
      end_task(e.target);
    }
    // Start what became ready once every event of this instant is handled.
    if (dirty_ != 0 && (queue_.empty() || queue_.top_time() > now_)) start_ready();
  }
  close_instant();
  if (ended_ != n) {
    // A builder bug: a resource's program order contradicts the dependencies.
    std::fprintf(stderr, "zplan: internal error: step graph deadlocked (%zu of %zu tasks ran)\n",
                 ended_, n);
    std::abort();
  }
  result->end = now_;
  result->final_memory = memory_;
}

void Simulator::start_ready() {
  // Resources in a fixed (ascending) order: which one starts first within an instant never
  // matters, because their tasks are independent until one of them ends.
  uint32_t pending = dirty_;
  dirty_ = 0;
  while (pending != 0) {
    const int r = __builtin_ctz(pending);
    pending &= pending - 1;
    if (running_[r] != kNoTask) continue;  // it will be marked again when its task ends
    const std::vector<TaskId>& order = graph_->resource_order()[r];
    if (head_[r] >= order.size()) continue;
    TaskId id = order[head_[r]];
    if (deps_left_[id] != 0) continue;  // its last dependency will mark the resource again
    ++head_[r];
    start_task(id);
  }
}

void Simulator::start_task(TaskId id) {
  const Task& t = graph_->tasks()[id];
  const int r = static_cast<int>(t.resource);
  TaskTiming& timing = result_->timing[id];
  timing.start = now_;
  // Whichever ended later released this task: its last dependency or its resource predecessor.
  TaskId dep = last_dep_[id];
  TaskId prev = previous_[r];
  if (dep == kNoTask) {
    timing.released_by = prev;
  } else if (prev == kNoTask) {
    timing.released_by = dep;
  } else {
    timing.released_by = result_->timing[prev].end > result_->timing[dep].end ? prev : dep;
  }
  running_[r] = id;
  if (tracking_) {
    state_[id] = kRunning;
    hi_ = std::max(hi_, id + 1);
    started_.push_back(id);
    if (anchor_[id] != 0) {
      due_region_ = anchor_[id] - 1;
      due_anchor_ = id;
    }
  }
  if (t.effects_count != 0) apply_effects(t, /*at_end=*/false);
  if (t.slowed_by_comm) {
    remaining_[id] = t.latency_s + t.work_s;
    compute_updated_ = now_;
    schedule_compute(id);
    return;
  }
  if (t.slows_compute) set_comm_active(+1);
  SimDuration latency = to_duration(t.latency_s);
  if (t.link == LinkSlot::kNone || !(t.work_s > 0)) {
    // A task without a shared link (or without work on it) lasts latency + work.
    schedule(id, now_ + latency + to_duration(t.work_s), kBandwidthDone);
  } else {
    schedule(id, now_ + latency, kLatencyDone);
  }
}

void Simulator::end_task(TaskId id) {
  const Task& t = graph_->tasks()[id];
  const int r = static_cast<int>(t.resource);
  result_->timing[id].end = now_;
  if (t.effects_count != 0) apply_effects(t, /*at_end=*/true);
  if (t.slows_compute) set_comm_active(-1);
  running_[r] = kNoTask;
  previous_[r] = id;
  dirty_ |= 1u << r;
  ++ended_;
  const DagGraph& g = graph_->dag();
  if (tracking_) {
    state_[id] = kEnded;
    ended_list_.push_back(id);
  }
  for (auto [it, end] = boost::out_edges(static_cast<DagGraph::vertex_descriptor>(id), g);
       it != end; ++it) {
    TaskId next = static_cast<TaskId>(boost::target(*it, g));
    last_dep_[next] = id;  // ends are processed in time order: the last one to arrive is latest
    if (tracking_) {
      if (state_[next] == kUntouched) state_[next] = kTouched;
      hi_ = std::max(hi_, next + 1);
    }
    if (--deps_left_[next] == 0) dirty_ |= 1u << static_cast<int>(graph_->tasks()[next].resource);
  }
}

void Simulator::apply_effects(const Task& t, bool at_end) {
  const auto& effects = graph_->effects();
  for (uint32_t i = t.effects_begin; i < t.effects_begin + t.effects_count; ++i) {
    const MemEffect& e = effects[i];
    if (e.at_end != at_end) continue;
    memory_[static_cast<int>(e.tier)][e.category] += e.bytes;
    tier_changed_[static_cast<int>(e.tier)] = true;
    memory_changed_ = true;
  }
}

void Simulator::close_instant() {
  if (!memory_changed_) return;
  memory_changed_ = false;
  MemorySample sample;
  sample.at = now_;
  for (int t = 0; t < kNumTiers; ++t) {
    if (!tier_changed_[t] && !record_memory_) continue;
    tier_changed_[t] = false;
    // Summed in category order from the breakdown, so the total is the same whatever order this
    // instant's effects were applied in.
    double total = memory_[t].total();
    sample.bytes[t] = total;
    if (total > result_->peak[t]) {
      result_->peak[t] = total;
      result_->at_peak[t] = memory_[t];
      result_->peak_at[t] = now_;
    }
    if (tracking_ && (!period_peak_valid_[t] || total > period_peak_[t])) {
      period_peak_valid_[t] = true;
      period_peak_[t] = total;
      period_peak_at_[t] = memory_[t];
      period_peak_time_[t] = now_;
    }
  }
  if (record_memory_) result_->samples.push_back(sample);
}

void Simulator::set_comm_active(int delta) {
  const bool was = comm_active_ > 0;
  comm_active_ += delta;
  const bool is = comm_active_ > 0;
  if (was == is) return;
  // The running compute task changes speed: account for its progress so far, then reschedule.
  TaskId c = running_[static_cast<int>(Resource::kCompute)];
  const double rate = is ? 1 - graph_->comm_compute_slowdown : 1.0;
  const bool running = c != kNoTask && graph_->tasks()[c].slowed_by_comm;
  if (running) {
    remaining_[c] -= to_seconds(now_ - compute_updated_) * compute_rate_;
    compute_updated_ = now_;
  }
  compute_rate_ = rate;
  if (running) schedule_compute(c);
}

void Simulator::schedule_compute(TaskId c) {
  // A rate of zero (slowdown 1: no overlap at all) parks the task until collectives stop.
  if (compute_rate_ <= 0) {
    queue_.cancel(c);
    return;
  }
  schedule(c, now_ + to_duration(std::max(0.0, remaining_[c]) / compute_rate_), kBandwidthDone);
}

// Processor sharing: every active flow on a link progresses at 1/n of the full rate.
void Simulator::advance_link(int link) {
  LinkState& l = links_[link];
  if (!l.active.empty()) {
    double progress = to_seconds(now_ - l.updated) / static_cast<double>(l.active.size());
    for (TaskId f : l.active) remaining_[f] -= progress;
  }
  l.updated = now_;
}

void Simulator::reschedule_link(int link) {
  LinkState& l = links_[link];
  double share = static_cast<double>(l.active.size());
  for (TaskId f : l.active) {
    schedule(f, now_ + to_duration(std::max(0.0, remaining_[f]) * share), kBandwidthDone);
  }
}

void Simulator::join_link(TaskId id) {
  const Task& t = graph_->tasks()[id];
  int link = static_cast<int>(t.link);
  advance_link(link);
  remaining_[id] = t.work_s;
  links_[link].active.push_back(id);
  reschedule_link(link);
}

void Simulator::leave_link(TaskId id) {
  int link = static_cast<int>(graph_->tasks()[id].link);
  advance_link(link);
  auto& active = links_[link].active;
  auto it = std::find(active.begin(), active.end(), id);
  if (it != active.end()) active.erase(it);
  reschedule_link(link);
}

}  // namespace zplan::sim
