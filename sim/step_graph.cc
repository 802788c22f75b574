#include "sim/step_graph.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/input_error.h"
#include "sim/periodic.h"
#include "sim/time.h"

namespace zplan::sim {

const char* resource_name(Resource r) {
  static const char* const kNames[kNumResources] = {
      "compute",  "all-gather stream", "reduce stream", "H2D copy",
      "D2H copy", "CPU optimizer",     "NVMe read",     "NVMe write"};
  return kNames[static_cast<int>(r)];
}

const char* task_kind_name(TaskKind k) {
  static const char* const kNames[kNumTaskKinds] = {
      "forward",    "backward",      "recompute",     "all_gather",      "reduce_scatter",
      "all_reduce", "reduce",        "bucket_copy",   "grad_accumulate", "h2d",
      "d2h",        "optimizer_gpu", "optimizer_cpu", "nvme_read",       "nvme_write"};
  return kNames[static_cast<int>(k)];
}

bool is_collective(TaskKind k) {
  return k == TaskKind::kAllGather || k == TaskKind::kReduceScatter || k == TaskKind::kAllReduce ||
         k == TaskKind::kReduce;
}

TaskId StepGraph::add(const Task& task) {
  TaskId id = static_cast<TaskId>(tasks_.size());
  tasks_.push_back(task);
  order_[static_cast<int>(task.resource)].push_back(id);
  return id;
}

void StepGraph::depend(TaskId id, TaskId before) {
  assert(before < id && id < tasks_.size());
  edges_.emplace_back(before, id);
}

void StepGraph::effect(TaskId id, bool at_end, Tier tier, Category category, double bytes) {
  assert(id < tasks_.size());
  if (bytes == 0) return;
  effects_.push_back(MemEffect{at_end, tier, category, bytes});
  effect_owner_.push_back(id);
}

GraphFingerprint StepGraph::fingerprint() const {
  assert(!finalized_);
  Fingerprinter h;
  h.add(static_cast<uint64_t>(tasks_.size()));
  // What the engine and the outcome read of a task; its names (micro_step, layer, index), its
  // bytes and FLOPs are for traces and the executor, and leave the simulation unchanged.
  for (const Task& t : tasks_) {
    h.add(static_cast<uint64_t>(t.kind) | static_cast<uint64_t>(t.resource) << 8 |
          static_cast<uint64_t>(t.link) << 16);
    h.add(t.latency_s);
    h.add(t.work_s);
    h.add(t.host_s);
    h.add(t.wire_bytes);
  }
  h.add(static_cast<uint64_t>(effects_.size()));
  for (size_t i = 0; i < effects_.size(); ++i) {
    const MemEffect& e = effects_[i];
    h.add(static_cast<uint64_t>(effect_owner_[i]) | static_cast<uint64_t>(e.at_end) << 32 |
          static_cast<uint64_t>(e.tier) << 40 | static_cast<uint64_t>(e.category) << 48);
    h.add(e.bytes);
  }
  h.add(static_cast<uint64_t>(edges_.size()));
  for (const auto& [before, after] : edges_) {
    h.add(static_cast<uint64_t>(before) | static_cast<uint64_t>(after) << 32);
  }
  for (const MemoryBreakdown& tier : baseline) {
    for (double b : tier.bytes) h.add(b);
  }
  h.add(comm_compute_slowdown);
  return h.finish();
}

void StepGraph::clear() {
  tasks_.clear();
  effects_.clear();
  effect_owner_.clear();
  edges_.clear();
  in_degree_.clear();
  for (auto& o : order_) o.clear();
  hints_.clear();
  periods_.clear();
  baseline = {};
  comm_compute_slowdown = 0;
  finalized_ = false;
}

void StepGraph::reserve(size_t tasks) {
  tasks_.reserve(tasks);
  effects_.reserve(3 * tasks);
  effect_owner_.reserve(3 * tasks);
  edges_.reserve(2 * tasks);
}

void StepGraph::finalize() {
  const size_t n = tasks_.size();
  // Group effects by task with a counting sort (stable: each task keeps its effects in the order
  // they were added).
  scratch_offsets_.assign(n + 1, 0);
  for (TaskId owner : effect_owner_) ++scratch_offsets_[owner + 1];
  double total_s = 0;
  for (size_t i = 0; i < n; ++i) {
    Task& t = tasks_[i];
    total_s += t.latency_s + t.work_s;
    t.slowed_by_comm =
        t.resource == Resource::kCompute && !is_collective(t.kind) && t.link == LinkSlot::kNone;
    t.slows_compute = is_collective(t.kind) && t.resource != Resource::kCompute;
    tasks_[i].effects_begin = scratch_offsets_[i];
    tasks_[i].effects_count = scratch_offsets_[i + 1];
    scratch_offsets_[i + 1] += scratch_offsets_[i];
  }
  if (!(total_s <= kMaxGraphSeconds)) {
    char years[32];
    std::snprintf(years, sizeof years, "%.3g", total_s / (365.25 * 86400));
    throw InputError("simulation", "the tasks of one step add up to " + std::string(years) +
                                       " years, past the 31 years the simulator's clock is "
                                       "made for; check the sequence length, the batch size "
                                       "and the hardware profile's rates");
  }
  scratch_effects_.resize(effects_.size());
  for (size_t i = 0; i < effects_.size(); ++i) {
    scratch_effects_[scratch_offsets_[effect_owner_[i]]++] = effects_[i];
  }
  effects_.swap(scratch_effects_);
  effect_owner_.clear();
  // Edges by source (a counting sort again), duplicates dropped: a repeated edge would count one
  // dependency twice.
  scratch_offsets_.assign(n + 1, 0);
  for (const auto& e : edges_) ++scratch_offsets_[e.first + 1];
  for (size_t i = 0; i < n; ++i) scratch_offsets_[i + 1] += scratch_offsets_[i];
  std::vector<std::pair<TaskId, TaskId>>& sorted = scratch_edges_;
  sorted.resize(edges_.size());
  for (const auto& e : edges_) sorted[scratch_offsets_[e.first]++] = e;
  // Within one source, sort the few targets and drop repeats.
  size_t out = 0;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j < sorted.size() && sorted[j].first == sorted[i].first) ++j;
    if (j - i > 1) std::sort(sorted.begin() + i, sorted.begin() + j);
    for (size_t k = i; k < j; ++k) {
      if (k > i && sorted[k] == sorted[k - 1]) continue;
      sorted[out++] = sorted[k];
    }
    i = j;
  }
  sorted.resize(out);
  edges_.swap(sorted);
  in_degree_.assign(n, 0);
  for (const auto& e : edges_) ++in_degree_[e.second];
  dag_ = DagGraph(boost::edges_are_sorted, edges_.begin(), edges_.end(), n);
  finalized_ = true;
  find_periodic_regions(*this, &periods_);
}

}  // namespace zplan::sim
