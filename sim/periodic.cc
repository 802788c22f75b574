#include "sim/periodic.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace zplan::sim {

namespace {

// A period spans at most this many hinted units (layers): bucket boundaries drift through the
// layers and repeat only every few of them.
constexpr size_t kMaxUnitsPerPeriod = 16;
constexpr uint32_t kMinPeriodsPerRegion = 3;
// Smaller graphs (optimizer steps, tiny models) are not worth the search.
constexpr size_t kMinTasks = 64;

struct Run {
  TaskId begin, end;
  uint32_t period;
};

}  // namespace

bool exact_memory_value(double v) {
  constexpr double kQuantum = static_cast<double>(1ull << kMemoryQuantumBits);
  constexpr double kLimit = static_cast<double>(1ull << kMemoryExactBits);
  if (!(std::fabs(v) < kLimit)) return false;
  const double scaled = v * kQuantum;  // exact: a power of two, and |scaled| < 2^52
  return static_cast<double>(static_cast<int64_t>(scaled)) == scaled;
}

bool is_shifted_copy(const StepGraph& graph, TaskId i, TaskId j) {
  const Task& a = graph.tasks()[i];
  const Task& b = graph.tasks()[j];
  if (a.kind != b.kind || a.resource != b.resource || a.link != b.link ||
      a.latency_s != b.latency_s || a.work_s != b.work_s || a.host_s != b.host_s ||
      a.wire_bytes != b.wire_bytes ||
      a.slowed_by_comm != b.slowed_by_comm || a.slows_compute != b.slows_compute ||
      a.effects_count != b.effects_count || graph.in_degree()[i] != graph.in_degree()[j]) {
    return false;
  }
  const auto& effects = graph.effects();
  for (uint32_t k = 0; k < a.effects_count; ++k) {
    const MemEffect& x = effects[a.effects_begin + k];
    const MemEffect& y = effects[b.effects_begin + k];
    if (x.at_end != y.at_end || x.tier != y.tier || x.category != y.category ||
        x.bytes != y.bytes) {
      return false;
    }
  }
  const DagGraph& g = graph.dag();
  auto [ai, ae] = boost::out_edges(static_cast<DagGraph::vertex_descriptor>(i), g);
  auto [bi, be] = boost::out_edges(static_cast<DagGraph::vertex_descriptor>(j), g);
  const TaskId shift = j - i;
  for (; ai != ae && bi != be; ++ai, ++bi) {
    if (boost::target(*bi, g) != boost::target(*ai, g) + shift) return false;
  }
  return ai == ae && bi == be;
}

void find_periodic_regions(const StepGraph& graph, std::vector<PeriodicRegion>* regions) {
  regions->clear();
  const auto& tasks = graph.tasks();
  const size_t n = tasks.size();
  const std::vector<TaskId>& hints = graph.repeat_hints();
  if (n < kMinTasks || hints.size() < 2 * kMinPeriodsPerRegion) return;
  thread_local std::vector<Run> runs;
  runs.clear();
  // 1. Candidates from the hints: stretches where the distances between consecutive hints repeat
  // every k hints; the period is the tasks k hints span.
  const size_t m = hints.size();
  for (size_t k = 1; k <= kMaxUnitsPerPeriod && (kMinPeriodsPerRegion * k) < m; ++k) {
    size_t start = 0, len = 0;
    for (size_t j = 0; j + k + 1 <= m; ++j) {
      const bool same = j + k + 1 < m && hints[j + 1] - hints[j] == hints[j + k + 1] - hints[j + k];
      if (same) {
        if (len++ == 0) start = j;
        continue;
      }
      if (len >= (kMinPeriodsPerRegion - 1) * k) {
        const uint32_t period = hints[start + k] - hints[start];
        if (period > 0) runs.push_back({hints[start], hints[start + len + k], period});
      }
      len = 0;
    }
  }
  // 2. The longest candidates first (the shortest period among equally long ones), disjoint. Each
  // is checked task by task: its longest stretch of tasks i whose task i + P is a copy, widened
  // as far as copies go on either side (the hints mark compute tasks; a layer's gathers and
  // copies come before them).
  std::sort(runs.begin(), runs.end(), [](const Run& x, const Run& y) {
    if (x.end - x.begin != y.end - y.begin) return x.end - x.begin > y.end - y.begin;
    if (x.period != y.period) return x.period < y.period;
    return x.begin < y.begin;
  });
  for (const Run& run : runs) {
    auto overlaps = [&](TaskId b, TaskId e) {
      for (const PeriodicRegion& r : *regions) {
        if (b < r.end && r.begin < e) return true;
      }
      return false;
    };
    if (overlaps(run.begin, run.end)) continue;
    const uint32_t p = run.period;
    TaskId best_begin = 0, best_end = 0;  // copies hold for i in [best_begin, best_end)
    for (TaskId i = run.begin; i + p < run.end;) {
      if (!is_shifted_copy(graph, i, i + p)) {
        ++i;
        continue;
      }
      TaskId j = i + 1;
      while (j + p < run.end && is_shifted_copy(graph, j, j + p)) ++j;
      if (j - i > best_end - best_begin) {
        best_begin = i;
        best_end = j;
      }
      i = j;
    }
    if (best_end == best_begin) continue;
    while (best_begin > 0 && !overlaps(best_begin - 1, best_end + p) &&
           is_shifted_copy(graph, best_begin - 1, best_begin - 1 + p)) {
      --best_begin;
    }
    while (best_end + p < n && !overlaps(best_begin, best_end + p + 1) &&
           is_shifted_copy(graph, best_end, best_end + p)) {
      ++best_end;
    }
    PeriodicRegion r;
    r.begin = best_begin;
    r.end = best_end + p;
    r.period = p;
    if (r.end - r.begin < kMinPeriodsPerRegion * p || overlaps(r.begin, r.end)) continue;
    r.exact_memory = true;
    for (TaskId i = r.begin; i < r.end; ++i) {
      const Task& t = tasks[i];
      if (i < r.begin + p) ++r.per_period[static_cast<int>(t.resource)];
      for (uint32_t k = t.effects_begin; k < t.effects_begin + t.effects_count; ++k) {
        const double b = graph.effects()[k].bytes;
        r.exact_memory = r.exact_memory && exact_memory_value(b);
        if (i < r.begin + p) r.effect_bytes_per_period += std::fabs(b);
      }
    }
    regions->push_back(r);
  }
  std::sort(regions->begin(), regions->end(),
            [](const PeriodicRegion& x, const PeriodicRegion& y) { return x.begin < y.begin; });
}

}  // namespace zplan::sim
