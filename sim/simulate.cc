#include "sim/simulate.h"

#include <algorithm>
#include <cstdio>

#include "hardware/cost_model.h"
#include "sim/step_builder.h"
#include "sim/trace_writer.h"

namespace zplan::sim {

namespace {

PathPart path_part(const Task& t) {
  switch (t.kind) {
    case TaskKind::kAllGather:
      return PathPart::kAllGather;
    case TaskKind::kAllReduce:
    case TaskKind::kReduceScatter:
    case TaskKind::kReduce:
    case TaskKind::kBucketCopy:
      return PathPart::kReduce;
    case TaskKind::kH2D:
    case TaskKind::kD2H:
      return PathPart::kHostCopy;
    case TaskKind::kOptimizerCpu:
      return PathPart::kCpuOptimizer;
    case TaskKind::kNvmeRead:
    case TaskKind::kNvmeWrite:
      return PathPart::kNvme;
    case TaskKind::kGradAccumulate:
      return t.resource == Resource::kCompute ? PathPart::kCompute : PathPart::kReduce;
    default:
      return PathPart::kCompute;
  }
}

// Time `r`'s tasks ran while the compute stream ran nothing. Both resources run one task at a
// time in program order, so their intervals are sorted and disjoint: a merge walk suffices.
double exposed_time(const StepGraph& g, const EngineResult& er, Resource r) {
  const auto& comp = g.resource_order()[static_cast<int>(Resource::kCompute)];
  const auto& mine = g.resource_order()[static_cast<int>(r)];
  double exposed = 0;
  size_t ci = 0;
  for (TaskId id : mine) {
    SimTime s = er.timing[id].start, e = er.timing[id].end;
    SimDuration covered{0};
    while (ci < comp.size() && er.timing[comp[ci]].end <= s) ++ci;
    for (size_t k = ci; k < comp.size(); ++k) {
      SimTime cs = er.timing[comp[k]].start, ce = er.timing[comp[k]].end;
      if (cs >= e) break;
      covered += std::min(e, ce) - std::max(s, cs);
    }
    exposed += to_seconds((e - s) - covered);
  }
  return exposed;
}

// What simulate_step keeps of one run of the engine on `g`.
GraphOutcome summarize(const StepGraph& g, const EngineResult& er) {
  GraphOutcome o;
  o.duration_s = to_seconds(er.end);
  o.tasks = g.tasks().size();
  o.events = er.events;
  const auto& tasks = g.tasks();
  for (size_t k = 0; k < tasks.size(); ++k) {
    const Task& t = tasks[k];
    o.resources[static_cast<int>(t.resource)].busy_s +=
        to_seconds(er.timing[k].end - er.timing[k].start);
    o.wire_bytes += t.wire_bytes;
    o.wire_bytes_by_kind[static_cast<int>(t.kind)] += t.wire_bytes;
    o.tasks_by_kind[static_cast<int>(t.kind)] += 1;
    o.bytes_by_kind[static_cast<int>(t.kind)] += t.bytes;
  }
  for (int r = 1; r < kNumResources; ++r) {
    o.resources[r].exposed_s = exposed_time(g, er, static_cast<Resource>(r));
  }
  // The critical path: from the task that ended last, back through what released each task.
  TaskId cur = kNoTask;
  for (size_t k = 0; k < tasks.size(); ++k) {
    if (cur == kNoTask || er.timing[k].end > er.timing[cur].end) cur = static_cast<TaskId>(k);
  }
  while (cur != kNoTask) {
    const Task& t = tasks[cur];
    const double ran = to_seconds(er.timing[cur].end - er.timing[cur].start);
    const int part = static_cast<int>(path_part(t));
    // The host-floor share of a compute task, in proportion if the task ran slowed.
    const double total = t.latency_s + t.work_s;
    const double host = t.host_s > 0 && total > 0 ? ran * std::min(1.0, t.host_s / total) : 0;
    o.critical_path_s[static_cast<int>(PathPart::kHost)] += host;
    o.critical_path_s[part] += ran - host;
    o.critical_latency_s[part] += std::min(ran, t.latency_s);
    cur = er.timing[cur].released_by;
  }
  o.peak = er.peak;
  o.at_peak = er.at_peak;
  o.final_memory = er.final_memory;
  return o;
}

// Outcomes a workspace remembers before it starts over (about 1 KB each).
constexpr size_t kMaxOutcomes = 8192;

}  // namespace

const char* path_part_name(PathPart part) {
  static const char* const kNames[kNumPathParts] = {
      "compute", "all-gather", "gradient reduction", "host copies", "CPU optimizer", "NVMe",
      "host Python"};
  return kNames[static_cast<int>(part)];
}

std::string StepResult::bottleneck() const {
  if (step_time_s <= 0) return "empty step";
  std::vector<std::pair<double, int>> parts;
  for (int i = 0; i < kNumPathParts; ++i) parts.emplace_back(critical_path_s[i], i);
  std::stable_sort(parts.begin(), parts.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  std::string out;
  for (const auto& [seconds, i] : parts) {
    double share = 100.0 * seconds / step_time_s;
    if (share < 1.0) continue;
    if (!out.empty()) out += ", ";
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s %.0f%%", path_part_name(static_cast<PathPart>(i)), share);
    out += buf;
  }
  return out;
}

namespace {

// The path part that binds a step that is not compute-bound: the largest non-compute part.
int binding_part(const std::array<double, kNumPathParts>& path_s) {
  int worst = 1;
  for (int p = 2; p < kNumPathParts; ++p) {
    if (path_s[p] > path_s[worst]) worst = p;
  }
  return worst;
}

bool is_collective_part(int part) {
  return part == static_cast<int>(PathPart::kAllGather) ||
         part == static_cast<int>(PathPart::kReduce);
}

}  // namespace

std::string bound_phrase(const std::array<double, kNumPathParts>& path_s,
                         const std::array<double, kNumPathParts>& latency_s, double step_s) {
  if (!(step_s > 0)) return "empty step";
  const double compute = path_s[0] / step_s;
  if (is_compute_bound(compute)) return "compute-bound";
  const int p = binding_part(path_s);
  const char* name = path_part_name(static_cast<PathPart>(p));
  char buf[160];
  if (is_collective_part(p)) {
    // Latency dominates when the fixed latencies on the path outweigh the time at bandwidth.
    const bool latency = 2 * latency_s[p] > path_s[p];
    std::snprintf(buf, sizeof buf,
                  "communication-bound: %s, %s-dominated (%.0f%% of the step, latency %.0f%%)",
                  name, latency ? "latency" : "bandwidth", 100 * path_s[p] / step_s,
                  100 * latency_s[p] / step_s);
  } else if (p == static_cast<int>(PathPart::kHost)) {
    std::snprintf(buf, sizeof buf,
                  "host-bound: the GPU waits for the Python that issues its kernels (%.0f%% of "
                  "the step)",
                  100 * path_s[p] / step_s);
  } else {
    std::snprintf(buf, sizeof buf, "bound by %s (%.0f%% of the step)", name,
                  100 * path_s[p] / step_s);
  }
  return buf;
}

std::string bound_short(const std::array<double, kNumPathParts>& path_s,
                        const std::array<double, kNumPathParts>& latency_s, double step_s) {
  if (!(step_s > 0) || is_compute_bound(path_s[0] / step_s)) return "compute";
  const int p = binding_part(path_s);
  std::string s = path_part_name(static_cast<PathPart>(p));
  if (is_collective_part(p)) s += 2 * latency_s[p] > path_s[p] ? " (latency)" : " (bandwidth)";
  return s;
}

std::string StepResult::bound() const {
  return bound_phrase(critical_path_s, critical_latency_s, step_time_s);
}

namespace {

// The outcome of the graph in ws.graph (built unfinalized when `reuse`): one the workspace
// remembers for its fingerprint, or the engine's run of it, kept in *fresh.
const GraphOutcome& run_graph(SimWorkspace& ws, bool reuse, const EngineOptions& eo,
                              GraphOutcome* fresh) {
  StepGraph& graph = ws.graph;
  GraphFingerprint key;
  if (reuse) {
    key = graph.fingerprint();
    auto it = ws.outcomes.find(key);
    if (it != ws.outcomes.end()) {
      ++ws.reused;
      return it->second;
    }
    graph.finalize();
  }
  ws.simulator.run(graph, eo, &ws.result);
  ++ws.simulated;
  ws.tasks_run += graph.tasks().size();
  ws.tasks_jumped += ws.result.skipped_tasks;
  *fresh = summarize(graph, ws.result);
  if (reuse) {
    if (ws.outcomes.size() >= kMaxOutcomes) ws.outcomes.clear();
    ws.outcomes.emplace(key, *fresh);
  }
  return *fresh;
}

// Adds one simulated graph, standing for `repeat` of its kind, to *res: time, resources, wire
// bytes, critical path, and the memory peak (host tiers and NVMe scaled to the node).
void add_outcome(const GraphOutcome& out, int repeat, bool first, double per_node,
                 const StepBuilder& builder, StepResult* res) {
  res->step_time_s += out.duration_s * repeat;
  res->tasks += out.tasks;
  res->events += out.events;
  for (int r = 0; r < kNumResources; ++r) {
    res->resources[r].busy_s += out.resources[r].busy_s * repeat;
    res->resources[r].exposed_s += out.resources[r].exposed_s * repeat;
  }
  res->wire_bytes += out.wire_bytes * repeat;
  for (int k = 0; k < kNumTaskKinds; ++k) {
    res->wire_bytes_by_kind[k] += out.wire_bytes_by_kind[k] * repeat;
    res->tasks_by_kind[k] += out.tasks_by_kind[k] * repeat;
    res->bytes_by_kind[k] += out.bytes_by_kind[k] * repeat;
  }
  for (int p = 0; p < kNumPathParts; ++p) {
    res->critical_path_s[p] += out.critical_path_s[p] * repeat;
    res->critical_latency_s[p] += out.critical_latency_s[p] * repeat;
  }
  for (int t = 0; t < kNumTiers; ++t) {
    double scale = t == static_cast<int>(Tier::kGpu) ? 1.0 : per_node;
    if (first || out.peak[t] * scale > res->peak_bytes[t]) {
      res->peak_bytes[t] = out.peak[t] * scale;
      res->at_peak[t] = out.at_peak[t].scaled(scale);
    }
    if (first) res->steady[t] = builder.persistent()[t].scaled(scale);
  }
}

// Fragmentation on the GPU peak, and the rates: samples, tokens, FLOPs, MFU and HFU.
void finish_rates(const hardware::Cluster& cluster, const StepBuilder& builder,
                  StepResult* res) {
  const DsConfig& config = builder.inputs().config;
  const int gas = static_cast<int>(config.gradient_accumulation_steps);
  // The caching allocator's fragmentation on top of what is allocated, as the analytic model
  // adds it (memory_model.cc): a fraction of the non-runtime bytes. The runtime category does not
  // change during a step, so this grows with the allocated total and the peak stays where it was.
  // (The engine's peak is its breakdown's total, so the total after is the new peak.)
  {
    const int gpu = static_cast<int>(Tier::kGpu);
    res->at_peak[gpu].add_fragmentation(cluster.profile.runtime.allocator_fragmentation);
    res->peak_bytes[gpu] = res->at_peak[gpu].total();
  }
  // Critical-path pieces summed over distinct micro-steps equal their durations by construction.
  const double samples = static_cast<double>(config.train_batch_size);
  res->samples_per_s = samples / res->step_time_s;
  res->tokens_per_s =
      res->samples_per_s * static_cast<double>(builder.inputs().workload.seq_len);
  res->model_flops_per_gpu = builder.model_flops_per_micro_step() * gas;
  res->hardware_flops_per_gpu = builder.hardware_flops_per_micro_step() * gas;
  res->tflops_per_gpu = res->model_flops_per_gpu / res->step_time_s / 1e12;
  res->peak_flops_per_s =
      hardware::peak_flops_per_s(cluster.profile.gpu, precision_bytes(config.precision));
  res->mfu = res->model_flops_per_gpu / res->step_time_s / res->peak_flops_per_s;
  res->hfu = res->hardware_flops_per_gpu / res->step_time_s / res->peak_flops_per_s;
}

}  // namespace

StepResult simulate_step(const models::Model& model, const hardware::Cluster& cluster,
                         const DsConfig& config, const Workload& workload,
                         const SimulateOptions& options) {
  const bool observed = options.trace != nullptr || static_cast<bool>(options.observer);
  StepBuilder builder(model, cluster, config, workload, options.sizes);
  StepResult res;
  const int gas = static_cast<int>(config.gradient_accumulation_steps);
  std::vector<std::pair<int, int>> steps;
  if (options.every_micro_step || observed) {
    for (int i = 0; i < gas; ++i) steps.emplace_back(i, 1);
  } else {
    steps = builder.distinct_micro_steps();
  }
  const double per_node = cluster.gpus_per_node();
  SimWorkspace local;
  SimWorkspace& ws = options.workspace != nullptr ? *options.workspace : local;
  EngineOptions eo;
  eo.shuffle_seed = options.shuffle_seed;
  eo.record_memory = observed;
  // Observers and shuffled runs need the engine's own run; a one-off call has nothing to reuse.
  const bool reuse =
      ws.reuse_outcomes && options.workspace != nullptr && !observed && options.shuffle_seed == 0;
  double offset_s = 0;
  std::array<MemoryBreakdown, kNumTiers> boundary_memory{};
  GraphOutcome fresh;
  // The micro-steps (the boundary one last), then the optimizer step from where it left memory.
  for (size_t i = 0; i <= steps.size(); ++i) {
    const bool optimizer = i == steps.size();
    const int repeat = optimizer ? 1 : steps[i].second;
    if (optimizer) {
      builder.build_optimizer_step(boundary_memory, &ws.graph, /*finalize=*/!reuse);
    } else {
      builder.build(steps[i].first, &ws.graph, /*finalize=*/!reuse);
    }
    const GraphOutcome& out = run_graph(ws, reuse, eo, &fresh);
    if (!optimizer && steps[i].first == gas - 1) boundary_memory = out.final_memory;
    const double dur = out.duration_s;
    if (optimizer) {
      res.optimizer_step_s = dur;
    } else {
      res.micro_step_s.push_back(dur);
      res.micro_step_repeats.push_back(repeat);
    }
    add_outcome(out, repeat, /*first=*/i == 0, per_node, builder, &res);
    if (options.trace != nullptr) options.trace->add(ws.graph, ws.result, offset_s, per_node);
    if (options.observer) options.observer(ws.graph, ws.result, offset_s);
    offset_s += dur;
  }
  finish_rates(cluster, builder, &res);
  {
    // The run's GPU peak may come before the step: deepspeed.initialize holding the whole model
    // (init_gpu_memory), with the same fragmentation as the step's peak.
    MemoryBreakdown init = init_gpu_memory(builder.sizes(), cluster, config, workload);
    init.add_fragmentation(cluster.profile.runtime.allocator_fragmentation);
    const int gpu = static_cast<int>(Tier::kGpu);
    if (init.total() > res.peak_bytes[gpu]) {
      res.peak_bytes[gpu] = init.total();
      res.at_peak[gpu] = init;
      res.gpu_peak_at_init = true;
    }
  }
  if (options.analytic_memory) {
    res.analytic =
        analyze_memory(model, cluster, config, workload, builder.sizes(), builder.activations());
  }
  res.host_peak_bytes = res.peak_bytes[static_cast<int>(Tier::kPinnedHost)] +
                        res.peak_bytes[static_cast<int>(Tier::kHost)];
  // As the planner decides: a config fits only if the analytic bound fits too.
  TierBytes peak{res.peak_bytes[static_cast<int>(Tier::kGpu)], res.host_peak_bytes,
                 res.peak_bytes[static_cast<int>(Tier::kNvme)]};
  if (options.analytic_memory) {
    const MemoryFit analytic = res.analytic.fit();
    peak = {std::max(peak.gpu, analytic.peak.gpu), std::max(peak.host, analytic.peak.host),
            std::max(peak.nvme, analytic.peak.nvme)};
  }
  res.fit = memory_fit(peak, capacity_of(cluster.profile));
  if (options.trace != nullptr) options.trace->finish();
  return res;
}

}  // namespace zplan::sim
