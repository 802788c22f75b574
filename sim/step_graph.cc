#include "sim/step_graph.h"

#include <algorithm>
#include <cassert>
#include <numeric>

namespace zplan::sim {

const char* resource_name(Resource r) {
  static const char* const kNames[kNumResources] = {
      "compute",  "all-gather stream", "reduce stream", "H2D copy",
      "D2H copy", "CPU optimizer",     "NVMe read",     "NVMe write"};
  return kNames[static_cast<int>(r)];
}

const char* task_kind_name(TaskKind k) {
  static const char* const kNames[kNumTaskKinds] = {
      "forward",   "backward",     "recompute",       "all_gather",   "reduce_scatter",
      "all_reduce", "reduce",      "bucket_copy",     "grad_accumulate", "h2d",
      "d2h",       "optimizer_gpu", "optimizer_cpu",  "nvme_read",    "nvme_write"};
  return kNames[static_cast<int>(k)];
}

bool is_collective(TaskKind k) {
  return k == TaskKind::kAllGather || k == TaskKind::kReduceScatter ||
         k == TaskKind::kAllReduce || k == TaskKind::kReduce;
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

void StepGraph::finalize() {
  // Group effects by task, keeping each task's effects in the order they were added.
  std::vector<uint32_t> perm(effects_.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(),
                   [&](uint32_t a, uint32_t b) { return effect_owner_[a] < effect_owner_[b]; });
  std::vector<MemEffect> sorted(effects_.size());
  for (Task& t : tasks_) t.effects_count = 0;
  for (size_t i = 0; i < perm.size(); ++i) {
    sorted[i] = effects_[perm[i]];
    Task& t = tasks_[effect_owner_[perm[i]]];
    if (t.effects_count == 0) t.effects_begin = static_cast<uint32_t>(i);
    ++t.effects_count;
  }
  effects_ = std::move(sorted);
  effect_owner_.clear();
  // Duplicate edges would count a dependency twice; drop them.
  std::sort(edges_.begin(), edges_.end());
  edges_.erase(std::unique(edges_.begin(), edges_.end()), edges_.end());
  in_degree_.assign(tasks_.size(), 0);
  for (const auto& e : edges_) ++in_degree_[e.second];
  dag_ = DagGraph(boost::edges_are_sorted, edges_.begin(), edges_.end(), tasks_.size());
}

}  // namespace zplan::sim
