// The engine's jump over the repeats of a periodic region (see Simulator in sim/engine.h).
//
// Why a jump is exact. Let S_k be the state at the end of the instant in which the region's k-th
// anchor started, and suppose S_{k+1} equals S_k with every task id moved up by the period P and
// every time by D. Tasks i and i + P of the region are copies (sim/periodic.h), so from S_{k+1}
// the engine does what it did from S_k, P tasks further and D later -- as long as the tasks it
// touches are still copies, which holds while they stay inside the region. By induction the
// same is true of every later period, so the timings of periods k+2, k+3, ... are those of
// period k+1 shifted, and the state after m of them is S_{k+1} shifted m times. Memory is the
// exception: it may grow by the same amount each period (gradients accumulating, say); it is
// extrapolated only when that growth is zero or every amount involved is a sum double computes
// exactly.
#include <algorithm>
#include <cmath>

#include "sim/engine.h"
#include "sim/periodic.h"

namespace zplan::sim {

namespace {

// A snapshot is taken only while the tasks between the first one not ended and the last one
// touched span at most this many periods: comparing two snapshots costs their length.
constexpr TaskId kMaxWindowPeriods = 4;

}  // namespace

void Simulator::start_tracking(const EngineOptions& options) {
  const auto& regions = graph_->periodic_regions();
  tracking_ = options.skip_periods && options.shuffle_seed == 0 && !options.record_memory &&
              !regions.empty() && regions.size() < 255;
  due_region_ = -1;
  last_snap_ = -1;
  if (!tracking_) return;
  const size_t n = graph_->tasks().size();
  state_.assign(n, kUntouched);
  anchor_.assign(n, 0);
  for (size_t r = 0; r < regions.size(); ++r) {
    for (TaskId a = regions[r].begin; a < regions[r].end; a += regions[r].period) {
      anchor_[a] = static_cast<uint8_t>(r + 1);
    }
  }
  lo_ = 0;
  hi_ = 0;
  reset_period_record();
}

void Simulator::reset_period_record() {
  started_.clear();
  ended_list_.clear();
  period_peak_valid_.fill(false);
}

void Simulator::at_instant_end() {
  const int region = due_region_;
  due_region_ = -1;
  const int index = last_snap_ == 0 ? 1 : 0;
  Snapshot& cur = snaps_[index];
  cur.region = region;
  cur.anchor = due_anchor_;
  if (!take_snapshot(&cur)) {
    last_snap_ = -1;
  } else if (int64_t periods = last_snap_ < 0 ? 0 : periods_to_skip(snaps_[last_snap_], cur);
             periods > 0) {
    skip(snaps_[last_snap_], cur, periods);
    last_snap_ = -1;
  } else {
    last_snap_ = index;
  }
  reset_period_record();
}

bool Simulator::take_snapshot(Snapshot* s) {
  const size_t n = graph_->tasks().size();
  while (lo_ < n && state_[lo_] == kEnded) ++lo_;
  s->at = now_;
  s->lo = lo_;
  s->hi = std::max(hi_, lo_);
  s->events = result_->events;
  const PeriodicRegion& region = graph_->periodic_regions()[s->region];
  s->tasks.clear();
  if (s->hi - s->lo > kMaxWindowPeriods * region.period) return false;  // too long to compare
  const auto& timing = result_->timing;
  for (TaskId i = s->lo; i < s->hi; ++i) {
    const TaskId dep = last_dep_[i];
    s->tasks.push_back(TaskSnap{state_[i], due_kind_[i], deps_left_[i], dep,
                                dep != kNoTask ? timing[dep].end : SimTime{}, remaining_[i]});
  }
  s->pending.clear();
  queue_.pending(&s->pending);
  for (int r = 0; r < kNumResources; ++r) {
    const std::vector<TaskId>& order = graph_->resource_order()[r];
    ResourceSnap& rs = s->resources[r];
    rs.head = head_[r];
    rs.head_task = head_[r] < order.size() ? order[head_[r]] : kNoTask;
    rs.running = running_[r];
    rs.previous = previous_[r];
    rs.previous_end = previous_[r] != kNoTask ? timing[previous_[r]].end : SimTime{};
    rs.fixed = rs.running == kNoTask && (rs.head_task == kNoTask || rs.head_task >= region.end);
  }
  for (int l = 0; l < kNumLinkSlots; ++l) {
    s->links[l] = links_[l].active;
    s->link_updated[l] = links_[l].updated;
  }
  s->memory = memory_;
  s->comm_active = comm_active_;
  s->compute_rate = compute_rate_;
  s->compute_updated = compute_updated_;
  return true;
}

int64_t Simulator::periods_to_skip(const Snapshot& prev, const Snapshot& cur) const {
  const PeriodicRegion& region = graph_->periodic_regions()[cur.region];
  const TaskId p = region.period;
  if (prev.region != cur.region || cur.anchor != prev.anchor + p || prev.lo < region.begin ||
      cur.lo != prev.lo + p || cur.hi != prev.hi + p) {
    return 0;
  }
  // How far the next periods reach: the tasks touched, and the next task of each resource.
  TaskId reach = cur.hi;
  for (const ResourceSnap& rs : cur.resources) {
    if (!rs.fixed && rs.head_task != kNoTask) reach = std::max(reach, rs.head_task + 1);
  }
  if (reach + p > region.end) return 0;
  const int64_t periods = (region.end - reach) / p;
  const SimDuration dt = cur.at - prev.at;
  // An id in `prev` and its counterpart in `cur`: both none, or one period apart inside the
  // region (ids before it are not known to repeat).
  auto same_id = [&](TaskId a, TaskId b) {
    return a == kNoTask ? b == kNoTask : a >= region.begin && b == a + p;
  };
  for (size_t k = 0; k < cur.tasks.size(); ++k) {
    const TaskSnap& a = prev.tasks[k];
    const TaskSnap& b = cur.tasks[k];
    if (a.state != b.state || a.deps_left != b.deps_left) return 0;
    if (a.state == kRunning && (a.due != b.due || a.remaining != b.remaining)) return 0;
    if (a.state <= kTouched && (!same_id(a.last_dep, b.last_dep) ||
                                (a.last_dep != kNoTask && b.last_dep_end - a.last_dep_end != dt))) {
      return 0;
    }
  }
  if (prev.pending.size() != cur.pending.size()) return 0;
  for (size_t k = 0; k < cur.pending.size(); ++k) {
    if (!same_id(prev.pending[k].target, cur.pending[k].target) ||
        cur.pending[k].at - prev.pending[k].at != dt) {
      return 0;
    }
  }
  for (int r = 0; r < kNumResources; ++r) {
    const ResourceSnap& a = prev.resources[r];
    const ResourceSnap& b = cur.resources[r];
    if (a.fixed != b.fixed) return 0;
    if (a.fixed) {
      if (a.head != b.head || a.previous != b.previous) return 0;
      continue;
    }
    if (b.head != a.head + region.per_period[r] || !same_id(a.head_task, b.head_task) ||
        !same_id(a.running, b.running) || !same_id(a.previous, b.previous) ||
        (a.previous != kNoTask && b.previous_end - a.previous_end != dt)) {
      return 0;
    }
  }
  for (int l = 0; l < kNumLinkSlots; ++l) {
    const auto& a = prev.links[l];
    const auto& b = cur.links[l];
    if (a.size() != b.size()) return 0;
    for (size_t k = 0; k < a.size(); ++k) {
      if (!same_id(a[k], b[k])) return 0;
    }
    if (!a.empty() && cur.link_updated[l] - prev.link_updated[l] != dt) return 0;
  }
  if (prev.comm_active != cur.comm_active || prev.compute_rate != cur.compute_rate) return 0;
  const TaskId compute = cur.resources[static_cast<int>(Resource::kCompute)].running;
  if (compute != kNoTask && graph_->tasks()[compute].slowed_by_comm &&
      cur.compute_updated - prev.compute_updated != dt) {
    return 0;
  }
  // The critical-path links copied forward must be ids that repeat.
  for (TaskId x : started_) {
    const TaskId by = result_->timing[x].released_by;
    if (by != kNoTask && by < region.begin) return 0;
  }
  // Memory: the same each period, or growing by amounts double adds exactly.
  bool drift = false;
  for (int t = 0; t < kNumTiers; ++t) drift |= prev.memory[t].bytes != cur.memory[t].bytes;
  if (drift) {
    if (!region.exact_memory) return 0;
    const double limit = std::ldexp(1.0, kMemoryExactBits);
    const double moves = 6 * region.effect_bytes_per_period;  // within the tasks compared
    for (int t = 0; t < kNumTiers; ++t) {
      for (int c = 0; c < kNumCategories; ++c) {
        const double a = prev.memory[t].bytes[c], b = cur.memory[t].bytes[c];
        const double at_peak = period_peak_valid_[t] ? period_peak_at_[t].bytes[c] : 0;
        if (!exact_memory_value(a) || !exact_memory_value(b) || !exact_memory_value(at_peak) ||
            std::max({std::fabs(a), std::fabs(b), std::fabs(at_peak)}) +
                    static_cast<double>(periods) * std::fabs(b - a) + moves >=
                limit) {
          return 0;
        }
      }
    }
  }
  return periods;
}

void Simulator::skip(const Snapshot& prev, const Snapshot& cur, int64_t periods) {
  const PeriodicRegion& region = graph_->periodic_regions()[cur.region];
  const TaskId p = region.period;
  const SimDuration dt = cur.at - prev.at;
  auto& timing = result_->timing;
  // The timings of the skipped periods: the last period's, shifted once per period.
  for (int64_t j = 1; j <= periods; ++j) {
    const TaskId ids = static_cast<TaskId>(j) * p;
    const SimDuration later = dt * j;
    for (TaskId x : started_) {
      TaskTiming& t = timing[x + ids];
      t.start = timing[x].start + later;
      const TaskId by = timing[x].released_by;
      t.released_by = by == kNoTask ? kNoTask : by + ids;
    }
    for (TaskId y : ended_list_) timing[y + ids].end = timing[y].end + later;
  }
  const TaskId ids = static_cast<TaskId>(periods) * p;
  const SimDuration later = dt * periods;
  // The tasks' state: the window moves up by `ids` (copied from the top down, since the ranges
  // may overlap); what it leaves behind has ended.
  for (TaskId i = cur.hi; i-- > cur.lo;) {
    const TaskId d = i + ids;
    deps_left_[d] = deps_left_[i];
    due_kind_[d] = due_kind_[i];
    remaining_[d] = remaining_[i];
    last_dep_[d] = last_dep_[i] == kNoTask ? kNoTask : last_dep_[i] + ids;
    state_[d] = state_[i];
  }
  for (TaskId i = cur.lo; i < cur.lo + ids; ++i) {
    deps_left_[i] = 0;
    state_[i] = kEnded;
  }
  queue_.shift(ids, later);
  for (int r = 0; r < kNumResources; ++r) {
    if (cur.resources[r].fixed) continue;
    head_[r] += static_cast<size_t>(periods) * region.per_period[r];
    if (running_[r] != kNoTask) running_[r] += ids;
    if (previous_[r] != kNoTask) previous_[r] += ids;
  }
  for (LinkState& l : links_) {
    for (TaskId& f : l.active) f += ids;
    l.updated += later;
  }
  const double m = static_cast<double>(periods);
  for (int t = 0; t < kNumTiers; ++t) {
    // Growth per period D = cur - prev, exact by periods_to_skip's checks (or zero).
    MemoryBreakdown growth;
    for (int c = 0; c < kNumCategories; ++c) {
      growth.bytes[c] = cur.memory[t].bytes[c] - prev.memory[t].bytes[c];
      memory_[t].bytes[c] += m * growth.bytes[c];
    }
    // The highest total of the skipped periods is the last period's peak moved by the growth
    // (if it grows; otherwise no skipped period beats the recorded one, already counted).
    if (!period_peak_valid_[t]) continue;
    MemoryBreakdown at = period_peak_at_[t];
    for (int c = 0; c < kNumCategories; ++c) at.bytes[c] += m * growth.bytes[c];
    const double total = at.total();
    if (total > result_->peak[t]) {
      result_->peak[t] = total;
      result_->at_peak[t] = at;
      result_->peak_at[t] = period_peak_time_[t] + later;
    }
  }
  compute_updated_ += later;
  now_ += later;
  ended_ += static_cast<size_t>(periods) * ended_list_.size();
  lo_ = cur.lo + ids;
  hi_ = cur.hi + ids;
  result_->events += static_cast<uint64_t>(periods) * (cur.events - prev.events);
  result_->skipped_tasks += static_cast<size_t>(periods) * started_.size();
}

}  // namespace zplan::sim
