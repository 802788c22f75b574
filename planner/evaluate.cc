#include "planner/evaluate.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "sim/step_inputs.h"
#include "sim/tensor_parallel.h"

namespace zplan::planner {

namespace {

constexpr int kGpu = static_cast<int>(sim::Tier::kGpu);
constexpr int kNvme = static_cast<int>(sim::Tier::kNvme);

// Candidates a thread takes at a time for their analytic bound (microseconds each).
constexpr size_t kAnalyticChunk = 16;
constexpr auto kProgressPeriod = std::chrono::milliseconds(100);

// The units of work the simulating threads take: the groups of equivalent candidates (led by
// `leaders`) that share stage, offload, micro-batch, accumulation and checkpointing, in
// enumeration order. Configurations sharing micro-step graphs (sub-group sizes) differ only in
// the other knobs, so each unit's graph reuse happens in one thread's workspace whatever the
// timing. Units are handed out largest first (a stage-3 unit of many tuning knobs costs most),
// so threads finish together.
std::vector<std::vector<uint32_t>> work_units(const std::vector<Candidate>& candidates,
                                              const std::vector<uint32_t>& leaders) {
  std::map<std::array<int64_t, 6>, size_t> unit_of;
  std::vector<std::vector<uint32_t>> units;
  for (uint32_t g = 0; g < leaders.size(); ++g) {
    const Candidate& c = candidates[leaders[g]];
    const std::array<int64_t, 6> key = {c[Knob::kStage],        c[Knob::kOffloadOptimizer],
                                        c[Knob::kOffloadParam],   c[Knob::kMicroBatch],
                                        c[Knob::kCheckpointing], c.gas};
    auto [it, added] = unit_of.emplace(key, units.size());
    if (added) units.emplace_back();
    units[it->second].push_back(g);
  }
  std::stable_sort(units.begin(), units.end(),
                   [](const auto& a, const auto& b) { return a.size() > b.size(); });
  return units;
}

// The evaluation's peaks against the problem's capacities and headroom.
sim::MemoryFit fit_of(const Problem& problem, const Evaluation& e) {
  return sim::memory_fit({e.peak_bytes[kGpu], e.host_peak_bytes, e.peak_bytes[kNvme]},
                         sim::capacity_of(problem.cluster.profile), problem.headroom);
}

}  // namespace

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kFits:
      return "fits";
    case Verdict::kOverSim:
      return "over (simulated)";
    case Verdict::kPruned:
      return "pruned";
    case Verdict::kOverPruned:
      return "over";
  }
  return "?";
}

namespace {

// The analytic bound of `config`: memory figures, the shortfalls, verdict kPruned. (A config to
// simulate gets its verdict from add_simulation.)
Evaluation analytic_evaluation(const Problem& problem, const sim::DsConfig& config,
                               const sim::ZeroSizes& sizes) {
  Evaluation e;
  const sim::MemoryReport m =
      sim::analyze_memory(problem.model, problem.cluster, config, problem.workload, sizes,
                          sim::plan_activations(problem.model, config, problem.workload));
  for (int t = 0; t < sim::kNumTiers; ++t) {
    e.peak_bytes[t] = m.tiers[t].peak_bytes;
    e.at_peak[t] = m.tiers[t].at_peak;
  }
  e.host_peak_bytes = m.host_peak_bytes;
  e.gpu_peak_phase = m.tiers[kGpu].peak_phase;
  e.fit = fit_of(problem, e);
  return e;
}

bool should_simulate(const Evaluation& analytic, bool prune) {
  return !prune || analytic.fit.fits();
}

sim::StepResult simulate(const Problem& problem, const sim::DsConfig& config,
                         const sim::ZeroSizes& sizes, sim::SimWorkspace* workspace) {
  sim::SimulateOptions options;
  options.workspace = workspace;
  options.analytic_memory = false;  // analytic_evaluation has it
  options.sizes = &sizes;
  return sim::simulate_step(problem.model, problem.cluster, config, problem.workload, options);
}

// Completes the analytic evaluation *e with the simulation of its config (or of one with equal
// step inputs: the same result).
void add_simulation(const Problem& problem, const sim::StepResult& r, Evaluation* e) {
  const bool analytic_fits = e->fit.fits();
  e->simulated = true;
  // The simulated schedule may hold more than the analytic bound at its peak (never less in the
  // steady terms); a config fits only if both views fit.
  for (int t = 0; t < sim::kNumTiers; ++t) {
    if (r.peak_bytes[t] > e->peak_bytes[t]) {
      e->peak_bytes[t] = r.peak_bytes[t];
      e->at_peak[t] = r.at_peak[t];
    }
  }
  e->host_peak_bytes = std::max(e->host_peak_bytes, r.host_peak_bytes);
  e->fit = fit_of(problem, *e);
  e->verdict = !analytic_fits ? Verdict::kOverPruned
               : e->fit.fits() ? Verdict::kFits
                              : Verdict::kOverSim;
  e->step_time_s = r.step_time_s;
  e->samples_per_s = r.samples_per_s;
  e->tokens_per_s = r.tokens_per_s;
  e->tflops_per_gpu = r.tflops_per_gpu;
  e->mfu = r.mfu;
  e->hfu = r.hfu;
  e->critical_path_s = r.critical_path_s;
  e->critical_latency_s = r.critical_latency_s;
  e->resources = r.resources;
}

// Runs body(i, workspace) for every i in [0, n), on one thread per workspace at most (the calling
// thread is the first), each taking `chunk` items at a time; the calling thread calls `tick`
// about every kProgressPeriod. Rethrows the first exception a body throws.
template <typename Body>
void run_parallel(size_t n, size_t chunk, std::vector<sim::SimWorkspace>& workspaces,
                  const Body& body, const std::function<void()>& tick) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&](size_t slot) {
    auto last = std::chrono::steady_clock::now();
    try {
      while (!failed.load(std::memory_order_relaxed)) {
        const size_t begin = next.fetch_add(chunk, std::memory_order_relaxed);
        if (begin >= n) break;
        const size_t end = std::min(n, begin + chunk);
        for (size_t i = begin; i < end; ++i) body(i, workspaces[slot]);
        if (slot == 0 && tick) {
          auto now = std::chrono::steady_clock::now();
          if (now - last >= kProgressPeriod) {
            tick();
            last = now;
          }
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      failed = true;
    }
  };
  const size_t threads = std::max<size_t>(1, std::min(workspaces.size(), (n + chunk - 1) / chunk));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

// The ranks ZeRO partitions over: the GPUs, or the GPUs / AutoTP size (sim/tensor_parallel.h).
int data_parallel(const Problem& problem) {
  return sim::data_parallel_ranks(problem.cluster, problem.workload);
}

}  // namespace

Evaluation evaluate_one(const Problem& problem, const sim::DsConfig& config, bool prune,
                        sim::SimWorkspace* workspace) {
  sim::ZeroSizes own;
  const sim::ZeroSizes& sizes =
      workspace != nullptr
          ? workspace->sizes.get(problem.model, data_parallel(problem), config)
          : (own = sim::zero_sizes(problem.model, data_parallel(problem), config));
  Evaluation e = analytic_evaluation(problem, config, sizes);
  if (should_simulate(e, prune)) add_simulation(problem, simulate(problem, config, sizes, workspace), &e);
  return e;
}

std::vector<Evaluation> evaluate_all(const Problem& problem, const SearchSpace& space,
                                     const std::vector<Candidate>& candidates,
                                     const EvalOptions& options, SearchStats* stats) {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t n = candidates.size();
  std::vector<Evaluation> evals(n);
  const sim::DsConfig base = base_config(problem, space.batch);
  int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, std::min<int>(threads, static_cast<int>(n)));
  // The simulator's buffers and memos, one per thread, reused for every config.
  std::vector<sim::SimWorkspace> workspaces(threads);
  for (sim::SimWorkspace& ws : workspaces) ws.reuse_outcomes = options.reuse_outcomes;
  std::atomic<size_t> done{0};
  const std::function<void()> tick = [&] {
    if (options.progress) options.progress(done.load(std::memory_order_relaxed), n);
  };

  // 1. The analytic bound of every candidate, and the step inputs of each one to simulate.
  std::vector<uint8_t> simulate_it(n, 0);
  std::vector<sim::GraphFingerprint> keys(n);
  run_parallel(
      n, kAnalyticChunk, workspaces,
      [&](size_t i, sim::SimWorkspace& ws) {
        const sim::DsConfig config = to_ds_config(candidates[i], base, problem);
        const sim::ZeroSizes& sizes = ws.sizes.get(problem.model, data_parallel(problem), config);
        evals[i] = analytic_evaluation(problem, config, sizes);
        if (!should_simulate(evals[i], options.prune)) {
          done.fetch_add(1, std::memory_order_relaxed);
          return;
        }
        simulate_it[i] = 1;
        keys[i] = sim::fingerprint(sim::step_inputs(config, problem.workload, sizes));
      },
      tick);

  // 2. Candidates with equal step inputs build the same graphs and get the same result: the step
  // memo. Groups in index order, each led by its first member, so the work done is the same
  // whatever the thread count. Without reuse_outcomes every candidate is simulated (benchmarks).
  std::vector<std::vector<uint32_t>> groups;
  {
    std::unordered_map<sim::GraphFingerprint, uint32_t, sim::GraphFingerprintHash> by_key;
    for (size_t i = 0; i < n; ++i) {
      if (!simulate_it[i]) continue;
      if (!options.reuse_outcomes) {
        groups.push_back({static_cast<uint32_t>(i)});
        continue;
      }
      auto [it, added] = by_key.emplace(keys[i], static_cast<uint32_t>(groups.size()));
      if (added) groups.emplace_back();
      groups[it->second].push_back(static_cast<uint32_t>(i));
    }
  }

  // 3. One simulation per group, a unit of groups at a time.
  std::vector<uint32_t> leaders(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) leaders[g] = groups[g][0];
  const std::vector<std::vector<uint32_t>> units = work_units(candidates, leaders);
  run_parallel(
      units.size(), 1, workspaces,
      [&](size_t u, sim::SimWorkspace& ws) {
        for (uint32_t g : units[u]) {
          const std::vector<uint32_t>& members = groups[g];
          const sim::DsConfig config = to_ds_config(candidates[members[0]], base, problem);
          const sim::StepResult r = simulate(
              problem, config, ws.sizes.get(problem.model, data_parallel(problem), config),
              &ws);
          for (uint32_t m : members) add_simulation(problem, r, &evals[m]);
          done.fetch_add(members.size(), std::memory_order_relaxed);
        }
      },
      tick);
  if (options.progress) options.progress(n, n);

  if (stats != nullptr) {
    SearchStats s;
    s.generated = n;
    for (const Evaluation& e : evals) {
      s.pruned += e.verdict == Verdict::kPruned;
      s.simulated += e.simulated;
      s.fitting += e.fits();
    }
    s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const sim::SimWorkspace& ws : workspaces) {
      s.graphs_run += ws.simulated;
      s.graphs_reused += ws.reused;
      s.tasks_run += ws.tasks_run;
      s.tasks_jumped += ws.tasks_jumped;
    }
    s.steps_reused = s.simulated - groups.size();
    *stats = s;
  }
  return evals;
}

std::vector<size_t> pareto_front(const std::vector<Evaluation>& evals) {
  std::vector<size_t> fit;
  for (size_t i = 0; i < evals.size(); ++i) {
    if (evals[i].fits()) fit.push_back(i);
  }
  std::sort(fit.begin(), fit.end(), [&](size_t a, size_t b) {
    const Evaluation &x = evals[a], &y = evals[b];
    if (x.peak_bytes[kGpu] != y.peak_bytes[kGpu]) return x.peak_bytes[kGpu] < y.peak_bytes[kGpu];
    if (x.tokens_per_s != y.tokens_per_s) return x.tokens_per_s > y.tokens_per_s;
    return a < b;
  });
  std::vector<size_t> front;
  double best = -1;
  for (size_t i : fit) {
    if (evals[i].tokens_per_s > best) {
      front.push_back(i);
      best = evals[i].tokens_per_s;
    }
  }
  return front;
}

std::vector<size_t> rank_order(const std::vector<Evaluation>& evals) {
  std::vector<size_t> order(evals.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::vector<double> over(evals.size());
  for (size_t i = 0; i < evals.size(); ++i) over[i] = evals[i].fit.worst_over_fraction();
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Evaluation &x = evals[a], &y = evals[b];
    if (x.fits() != y.fits()) return x.fits();
    if (x.fits()) {
      if (x.tokens_per_s != y.tokens_per_s) return x.tokens_per_s > y.tokens_per_s;
    } else {
      if (over[a] != over[b]) return over[a] < over[b];
    }
    if (x.peak_bytes[kGpu] != y.peak_bytes[kGpu]) return x.peak_bytes[kGpu] < y.peak_bytes[kGpu];
    return a < b;
  });
  return order;
}

}  // namespace zplan::planner
