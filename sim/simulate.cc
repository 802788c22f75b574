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
    o.critical_path_s[static_cast<int>(path_part(tasks[cur]))] +=
        to_seconds(er.timing[cur].end - er.timing[cur].start);
    cur = er.timing[cur].released_by;
  }
  o.peak = er.peak;
  o.at_peak = er.at_peak;
  o.final_memory = er.final_memory;
  return o;
}

// Outcomes a workspace remembers before it starts over (about 1 KB each).
constexpr size_t kMaxOutcomes = 8192;
// Whole step results a workspace remembers (a few KB each).
constexpr size_t kMaxSteps = 4096;

// The key of SimWorkspace::steps: every field of the configuration that simulate_step reads
// (the ds_config's pass-through `other` blocks are read by nothing here), with stage 3's
// prefetch window min(stage3_prefetch_bucket_size, stage3_max_live_parameters) -- the only place
// either knob is read -- counted as 0 when it is below StepBuilder::inert_prefetch_window, and
// dropped below stage 3. The model, cluster and workload are the workspace's own; their names
// and sizes are mixed in as a guard against a workspace used for several.
GraphFingerprint step_key(const models::Model& model, const hardware::Cluster& cluster,
                          const DsConfig& c, const Workload& w, const ZeroSizes* sizes) {
  // A field added to these structs must be added below (or said not to matter) first.
  static_assert(sizeof(ZeroConfig) == 248, "ZeroConfig changed: update step_key");
  static_assert(sizeof(OffloadParamConfig) == 72, "OffloadParamConfig changed: update step_key");
  static_assert(sizeof(OffloadOptimizerConfig) == 64,
                "OffloadOptimizerConfig changed: update step_key");
  static_assert(sizeof(ActivationCheckpointingConfig) == 32,
                "ActivationCheckpointingConfig changed: update step_key");
  static_assert(sizeof(AioConfig) == 32, "AioConfig changed: update step_key");
  static_assert(sizeof(DsConfig) == 376, "DsConfig changed: update step_key");
  Fingerprinter h;
  h.add(model.name());
  h.add(model.num_params());
  h.add(static_cast<int64_t>(model.layers().size()));
  h.add(cluster.profile.name);
  h.add(cluster.gpus);
  h.add(cluster.nodes);
  h.add(w.seq_len);
  h.add(w.flash_attention);
  const ZeroConfig& z = c.zero;
  h.add(z.stage);
  h.add(z.contiguous_gradients);
  h.add(z.reduce_scatter);
  h.add(z.reduce_bucket_size);
  h.add(z.use_multi_rank_bucket_allreduce);
  h.add(z.allgather_bucket_size);
  h.add(z.overlap_comm);
  h.add(z.round_robin_gradients);
  const OffloadParamConfig& op = z.offload_param;
  h.add(static_cast<int>(op.device));
  h.add(op.nvme_path);
  h.add(op.buffer_count);
  h.add(op.buffer_size);
  h.add(op.max_in_cpu);
  h.add(op.pin_memory);
  const OffloadOptimizerConfig& oo = z.offload_optimizer;
  h.add(static_cast<int>(oo.device));
  h.add(oo.nvme_path);
  h.add(oo.buffer_count);
  h.add(oo.pin_memory);
  h.add(oo.pipeline_read);
  h.add(oo.pipeline_write);
  h.add(oo.fast_init);
  h.add(oo.ratio);
  h.add(z.sub_group_size);
  h.add(z.param_persistence_threshold);
  h.add(z.model_persistence_threshold);
  h.add(z.max_reuse_distance);
  double window = 0;
  if (z.stage == 3) {
    window = static_cast<double>(std::min(z.prefetch_bucket_size, z.max_live_parameters));
    const double inert = StepBuilder::inert_prefetch_window(
        sizes != nullptr ? *sizes : zero_sizes(model, cluster.gpus, c));
    if (window < inert) window = 0;
  }
  h.add(window);
  h.add(c.train_batch_size);
  h.add(c.micro_batch);
  h.add(c.gradient_accumulation_steps);
  h.add(static_cast<int>(c.precision));
  h.add(static_cast<int>(c.grad_accum_dtype));
  const ActivationCheckpointingConfig& ac = c.activation_checkpointing;
  h.add(ac.enabled);
  h.add(ac.partition_activations);
  h.add(ac.cpu_checkpointing);
  h.add(ac.contiguous_memory_optimization);
  h.add(ac.number_checkpoints.has_value());
  h.add(ac.number_checkpoints.value_or(0));
  h.add(ac.synchronize_checkpoint_boundary);
  h.add(ac.profile);
  const AioConfig& aio = c.aio;
  h.add(aio.block_size);
  h.add(aio.queue_depth);
  h.add(aio.intra_op_parallelism);
  h.add(aio.single_submit);
  h.add(aio.overlap_events);
  h.add(aio.use_gds);
  h.add(c.gradient_clipping);
  return h.finish();
}

}  // namespace

const char* path_part_name(PathPart part) {
  static const char* const kNames[kNumPathParts] = {
      "compute", "all-gather", "gradient reduction", "host copies", "CPU optimizer", "NVMe"};
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
    std::snprintf(buf, sizeof buf, "%s%s %.0f%%", i == 0 ? "" : "exposed ",
                  path_part_name(static_cast<PathPart>(i)), share);
    out += buf;
  }
  return out;
}

StepResult simulate_step(const models::Model& model, const hardware::Cluster& cluster,
                         const DsConfig& config, const Workload& workload,
                         const SimulateOptions& options) {
  const bool observed = options.trace != nullptr || static_cast<bool>(options.observer);
  // A configuration equivalent to one this workspace simulated: the same result, nothing built.
  const bool reuse_step = options.reuse_steps && options.workspace != nullptr &&
                          options.workspace->reuse_outcomes && !options.analytic_memory &&
                          !observed && options.shuffle_seed == 0 && !options.every_micro_step;
  GraphFingerprint step;
  if (reuse_step) {
    step = step_key(model, cluster, config, workload, options.sizes);
    auto it = options.workspace->steps.find(step);
    if (it != options.workspace->steps.end()) {
      ++options.workspace->steps_reused;
      return it->second;
    }
  }
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
  Simulator& simulator = ws.simulator;
  StepGraph& graph = ws.graph;
  EngineResult& er = ws.result;
  EngineOptions eo;
  eo.shuffle_seed = options.shuffle_seed;
  eo.record_memory = observed;
  // Observers and shuffled runs need the engine's own run; a one-off call has nothing to reuse.
  const bool reuse =
      ws.reuse_outcomes && options.workspace != nullptr && !observed && options.shuffle_seed == 0;
  double offset_s = 0;
  bool first = true;
  std::array<MemoryBreakdown, kNumTiers> boundary_memory{};
  GraphOutcome fresh;
  // The micro-steps (the boundary one last), then the optimizer step from where it left memory.
  for (size_t i = 0; i <= steps.size(); ++i) {
    const bool optimizer = i == steps.size();
    const int repeat = optimizer ? 1 : steps[i].second;
    if (optimizer) {
      builder.build_optimizer_step(boundary_memory, &graph, /*finalize=*/!reuse);
    } else {
      builder.build(steps[i].first, &graph, /*finalize=*/!reuse);
    }
    const GraphOutcome* out = nullptr;
    GraphFingerprint key;
    if (reuse) {
      key = graph.fingerprint();
      auto it = ws.outcomes.find(key);
      if (it != ws.outcomes.end()) {
        out = &it->second;
        ++ws.reused;
      } else {
        graph.finalize();
      }
    }
    if (out == nullptr) {
      simulator.run(graph, eo, &er);
      ++ws.simulated;
      ws.tasks_run += graph.tasks().size();
      ws.tasks_jumped += er.skipped_tasks;
      fresh = summarize(graph, er);
      out = &fresh;
      if (reuse) {
        if (ws.outcomes.size() >= kMaxOutcomes) ws.outcomes.clear();
        ws.outcomes.emplace(key, fresh);
      }
    }
    if (!optimizer && steps[i].first == gas - 1) boundary_memory = out->final_memory;
    const double dur = out->duration_s;
    if (optimizer) {
      res.optimizer_step_s = dur;
    } else {
      res.micro_step_s.push_back(dur);
      res.micro_step_repeats.push_back(repeat);
    }
    res.step_time_s += dur * repeat;
    res.tasks += out->tasks;
    res.events += out->events;
    for (int r = 0; r < kNumResources; ++r) {
      res.resources[r].busy_s += out->resources[r].busy_s * repeat;
      res.resources[r].exposed_s += out->resources[r].exposed_s * repeat;
    }
    res.wire_bytes += out->wire_bytes * repeat;
    for (int k = 0; k < kNumTaskKinds; ++k) {
      res.wire_bytes_by_kind[k] += out->wire_bytes_by_kind[k] * repeat;
    }
    for (int p = 0; p < kNumPathParts; ++p) {
      res.critical_path_s[p] += out->critical_path_s[p] * repeat;
    }
    for (int t = 0; t < kNumTiers; ++t) {
      double scale = t == static_cast<int>(Tier::kGpu) ? 1.0 : per_node;
      if (first || out->peak[t] * scale > res.peak_bytes[t]) {
        res.peak_bytes[t] = out->peak[t] * scale;
        res.at_peak[t] = out->at_peak[t].scaled(scale);
      }
      if (first) res.steady[t] = builder.persistent()[t].scaled(scale);
    }
    if (options.trace != nullptr) options.trace->add(graph, er, offset_s, per_node);
    if (options.observer) options.observer(graph, er, offset_s);
    offset_s += dur;
    first = false;
  }
  // The caching allocator's fragmentation on top of what is allocated, as the analytic model
  // adds it (memory_model.cc): a fraction of the non-runtime bytes. The runtime category does not
  // change during a step, so this grows with the allocated total and the peak stays where it was.
  // (The engine's peak is its breakdown's total, so the total after is the new peak.)
  {
    const int gpu = static_cast<int>(Tier::kGpu);
    res.at_peak[gpu].add_fragmentation(cluster.profile.runtime.allocator_fragmentation);
    res.peak_bytes[gpu] = res.at_peak[gpu].total();
  }
  // Critical-path pieces summed over distinct micro-steps equal their durations by construction.
  const double samples = static_cast<double>(config.train_batch_size);
  res.samples_per_s = samples / res.step_time_s;
  res.tokens_per_s = res.samples_per_s * static_cast<double>(workload.seq_len);
  res.model_flops_per_gpu = builder.model_flops_per_micro_step() * gas;
  res.hardware_flops_per_gpu = builder.hardware_flops_per_micro_step() * gas;
  res.tflops_per_gpu = res.model_flops_per_gpu / res.step_time_s / 1e12;
  res.peak_flops_per_s =
      hardware::peak_flops_per_s(cluster.profile.gpu, precision_bytes(config.precision));
  res.mfu = res.model_flops_per_gpu / res.step_time_s / res.peak_flops_per_s;
  res.hfu = res.hardware_flops_per_gpu / res.step_time_s / res.peak_flops_per_s;
  if (options.analytic_memory) {
    res.analytic = analyze_memory(model, cluster, config, builder.sizes(), builder.activations());
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
  if (reuse_step) {
    if (ws.steps.size() >= kMaxSteps) ws.steps.clear();
    ws.steps.emplace(step, res);
  }
  return res;
}

}  // namespace zplan::sim
