#include "planner/evaluate.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

namespace zplan::planner {

namespace {

constexpr int kGpu = static_cast<int>(sim::Tier::kGpu);
constexpr int kNvme = static_cast<int>(sim::Tier::kNvme);

constexpr auto kProgressPeriod = std::chrono::milliseconds(100);

// The units of work threads take: the candidates that share stage, offload, micro-batch,
// accumulation and checkpointing, in enumeration order. Configurations equivalent to each other
// (a knob the stage does not read, an inert prefetch window) and those sharing micro-step graphs
// (sub-group sizes) differ only in the other knobs, so each unit's reuse happens in one thread's
// workspace whatever the timing: which configs are answered from an equivalent one is the same
// in every build, on any number of threads. Units are handed out largest first (a stage-3 unit
// of many tuning knobs costs most), so threads finish together.
std::vector<std::vector<size_t>> work_units(const std::vector<Candidate>& candidates) {
  std::map<std::array<int64_t, 6>, size_t> unit_of;
  std::vector<std::vector<size_t>> units;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    const std::array<int64_t, 6> key = {c[Knob::kStage],         c[Knob::kOffloadOptimizer],
                                        c[Knob::kOffloadParam],  c[Knob::kMicroBatch],
                                        c[Knob::kCheckpointing], c.gas};
    auto [it, added] = unit_of.emplace(key, units.size());
    if (added) units.emplace_back();
    units[it->second].push_back(i);
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

Evaluation evaluate_one(const Problem& problem, const sim::DsConfig& config, bool prune,
                        sim::SimWorkspace* workspace) {
  Evaluation e;
  sim::ZeroSizes own;
  const sim::ZeroSizes& sizes =
      workspace != nullptr ? workspace->sizes.get(problem.model, problem.cluster.gpus, config)
                           : (own = sim::zero_sizes(problem.model, problem.cluster.gpus, config));
  const sim::MemoryReport m =
      sim::analyze_memory(problem.model, problem.cluster, config, sizes,
                          sim::plan_activations(problem.model, config, problem.workload));
  for (int t = 0; t < sim::kNumTiers; ++t) {
    e.peak_bytes[t] = m.tiers[t].peak_bytes;
    e.at_peak[t] = m.tiers[t].at_peak;
  }
  e.host_peak_bytes = m.host_peak_bytes;
  e.gpu_peak_phase = m.tiers[kGpu].peak_phase;
  e.fit = fit_of(problem, e);
  const bool analytic_fits = e.fit.fits();
  if (!analytic_fits && prune) {
    e.verdict = Verdict::kPruned;
    return e;
  }
  sim::SimulateOptions options;
  options.workspace = workspace;
  options.analytic_memory = false;  // computed above already
  // evaluate_all's workspaces serve one problem: equivalent configs share one simulation.
  options.reuse_steps = true;
  options.sizes = &sizes;
  const sim::StepResult r =
      sim::simulate_step(problem.model, problem.cluster, config, problem.workload, options);
  e.simulated = true;
  // The simulated schedule may hold more than the analytic bound at its peak (never less in the
  // steady terms); a config fits only if both views fit.
  for (int t = 0; t < sim::kNumTiers; ++t) {
    if (r.peak_bytes[t] > e.peak_bytes[t]) {
      e.peak_bytes[t] = r.peak_bytes[t];
      e.at_peak[t] = r.at_peak[t];
    }
  }
  e.host_peak_bytes = std::max(e.host_peak_bytes, r.host_peak_bytes);
  e.fit = fit_of(problem, e);
  e.verdict = !analytic_fits ? Verdict::kOverPruned
              : e.fit.fits() ? Verdict::kFits
                             : Verdict::kOverSim;
  e.step_time_s = r.step_time_s;
  e.samples_per_s = r.samples_per_s;
  e.tokens_per_s = r.tokens_per_s;
  e.tflops_per_gpu = r.tflops_per_gpu;
  e.mfu = r.mfu;
  e.hfu = r.hfu;
  e.critical_path_s = r.critical_path_s;
  e.resources = r.resources;
  return e;
}

std::vector<Evaluation> evaluate_all(const Problem& problem, const SearchSpace& space,
                                     const std::vector<Candidate>& candidates,
                                     const EvalOptions& options, SearchStats* stats) {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t n = candidates.size();
  std::vector<Evaluation> evals(n);
  const sim::DsConfig base = base_config(problem, space.batch);
  const std::vector<std::vector<size_t>> units = work_units(candidates);
  int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, std::min<int>(threads, static_cast<int>(units.size())));

  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::atomic<bool> failed{false};
  std::atomic<size_t> graphs_run{0}, graphs_reused{0}, steps_reused{0}, tasks_run{0},
      tasks_jumped{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&](bool reports) {
    auto last = std::chrono::steady_clock::now();
    sim::SimWorkspace workspace;  // the simulator's buffers, reused for every config
    workspace.reuse_outcomes = options.reuse_outcomes;
    try {
      while (!failed.load(std::memory_order_relaxed)) {
        const size_t u = next.fetch_add(1, std::memory_order_relaxed);
        if (u >= units.size()) break;
        for (size_t i : units[u]) {
          evals[i] = evaluate_one(problem, to_ds_config(candidates[i], base, problem),
                                  options.prune, &workspace);
        }
        done.fetch_add(units[u].size(), std::memory_order_relaxed);
        if (reports && options.progress) {
          auto now = std::chrono::steady_clock::now();
          if (now - last >= kProgressPeriod) {
            options.progress(done.load(std::memory_order_relaxed), n);
            last = now;
          }
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      failed = true;
    }
    graphs_run += workspace.simulated;
    graphs_reused += workspace.reused;
    steps_reused += workspace.steps_reused;
    tasks_run += workspace.tasks_run;
    tasks_jumped += workspace.tasks_jumped;
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, false);
  work(true);  // the calling thread works too, and reports progress
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
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
    s.graphs_run = graphs_run;
    s.graphs_reused = graphs_reused;
    s.steps_reused = steps_reused;
    s.tasks_run = tasks_run;
    s.tasks_jumped = tasks_jumped;
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
