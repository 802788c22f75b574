// plan_bench: how fast the planner searches.
//
// Two measurements, both on the case (20B = GPT-NeoX-20B on 8 A100-80GB, the default
// search of `zplan --model 20b --gpus 8 --hw a100`):
//  1. the default search end to end -- space, enumeration, analytic pruning, simulation of the
//     rest on every core, ranking and explanations -- as `plan()` runs it: configs generated /
//     pruned / simulated, median wall time of `--runs` runs (target: < 2 s on 2 cores);
//  2. raw evaluation throughput (the target: >= 10,000 configs/s per core, simulated, not
//     only pruned, saying how many were pruned): planner::evaluate_all over the same space as the
//     search runs it -- each config's analytic bound, then a simulation of every one the bound
//     does not prune -- on one thread and on all, in configs per second per core with the pruned
//     and simulated counts; then the harder case of every config simulated (no pruning), next to
//     the analytic bound's rate (what pruning costs). Identical graphs are simulated once (what
//     the planner does, sim::SimWorkspace); the rate with every graph run through the engine is
//     printed too.
//
//   plan_bench [--runs 5] [--model 20b] [--hw a100] [--gpus 8] [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "hardware/profile.h"
#include "models/catalog.h"
#include "planner/plan.h"

namespace {

using namespace zplan;
using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5, gpus = 8;
  std::string model_name = "20b", hw = "a100";
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--model") && i + 1 < argc) {
      model_name = argv[++i];
    } else if (!std::strcmp(argv[i], "--hw") && i + 1 < argc) {
      hw = argv[++i];
    } else if (!std::strcmp(argv[i], "--gpus") && i + 1 < argc) {
      gpus = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--json")) {
      json = true;
    } else {
      std::fprintf(stderr,
                   "usage: plan_bench [--runs N] [--model NAME] [--hw NAME] [--gpus N] [--json]\n");
      return 2;
    }
  }
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  planner::Problem problem{
      models::load_model(model_name),
      hardware::make_cluster(hardware::load_profile(hw), gpus, std::max(1, gpus / 8)),
      {},
      sim::Precision::kBf16,
      "/local_nvme",
      0.05};
  problem.workload.seq_len = problem.model.shape().default_seq_len;

  // 1. The default search, end to end.
  std::vector<double> wall;
  planner::PlanResult last;
  for (int r = 0; r < runs; ++r) {
    auto t0 = Clock::now();
    last = planner::plan(problem, {}, {}, {});
    wall.push_back(seconds_since(t0));
  }
  const planner::SearchStats& st = last.search.stats;

  // 2. Raw throughput: the same space, every config simulated (no pruning). The planner's path
  // reuses the outcome of a graph identical to one already simulated; the second figure runs
  // the engine on every graph.
  const planner::SearchSpace& space = last.search.space;
  const std::vector<planner::Candidate>& cands = last.search.candidates;
  auto timed = [&](int threads, bool reuse, planner::SearchStats* stats, bool prune = false) {
    planner::EvalOptions eo;
    eo.prune = prune;
    eo.threads = threads;
    eo.reuse_outcomes = reuse;
    std::vector<double> wall_s;
    for (int r = 0; r < std::max(1, runs / 2); ++r) {
      auto t0 = Clock::now();
      planner::evaluate_all(problem, space, cands, eo, stats);
      wall_s.push_back(seconds_since(t0));
    }
    return median(wall_s);
  };
  planner::SearchStats pruned_stats;
  const double pruned_one = timed(1, true, &pruned_stats, /*prune=*/true);
  const double pruned_all = timed(cores, true, nullptr, /*prune=*/true);
  planner::SearchStats reuse_stats;
  const double one_thread = timed(1, true, &reuse_stats);
  const double all_threads = timed(cores, true, nullptr);
  const double one_thread_no_reuse = timed(1, false, nullptr);
  // Per stage on one thread: stage 3 builds per-module gathers and dominates the cost.
  double stage_s[4] = {0, 0, 0, 0};
  size_t stage_n[4] = {0, 0, 0, 0};
  const sim::DsConfig base = planner::base_config(problem, space.batch);
  sim::SimWorkspace ws;
  ws.reuse_outcomes = false;
  for (const planner::Candidate& c : cands) {
    sim::DsConfig d = planner::to_ds_config(c, base, problem);
    auto t0 = Clock::now();
    planner::evaluate_one(problem, d, /*prune=*/false, &ws);
    stage_s[c.stage()] += seconds_since(t0);
    ++stage_n[c.stage()];
  }
  // The analytic bound alone (what pruning costs per config).
  auto t0 = Clock::now();
  size_t analytic = 0;
  for (int r = 0; r < 5; ++r) {
    for (const planner::Candidate& c : cands) {
      sim::MemoryReport m =
          sim::analyze_memory(problem.model, problem.cluster,
                              planner::to_ds_config(c, base, problem), problem.workload);
      analytic += m.fit(problem.headroom).fits();
    }
  }
  const double analytic_s = seconds_since(t0) / 5;

  const double n = static_cast<double>(cands.size());
  const double per_core_1 = n / one_thread;
  const double per_core_all = n / all_threads / cores;
  const double per_core_no_reuse = n / one_thread_no_reuse;
  if (json) {
    nlohmann::json j;
    j["case"] = {{"model", model_name}, {"hw", hw}, {"gpus", gpus}, {"cores", cores}};
    j["default_search"] = {{"generated", st.generated},     {"pruned", st.pruned},
                           {"simulated", st.simulated},     {"fitting", st.fitting},
                           {"median_wall_s", median(wall)}, {"runs", runs}};
    j["evaluation"] = {{"configs", cands.size()},
                       {"pruned", pruned_stats.pruned},
                       {"simulated", pruned_stats.simulated},
                       {"simulated_equivalent_to_an_earlier_one", pruned_stats.steps_reused},
                       {"graphs_run", pruned_stats.graphs_run},
                       {"graphs_reused", pruned_stats.graphs_reused},
                       {"tasks_run", pruned_stats.tasks_run},
                       {"tasks_jumped", pruned_stats.tasks_jumped},
                       {"configs_per_s_per_core_1_thread", n / pruned_one},
                       {"configs_per_s_per_core_all_threads", n / pruned_all / cores}};
    j["raw"] = {{"configs", cands.size()},
                {"pruned", 0},
                {"graphs_run", reuse_stats.graphs_run},
                {"graphs_reused", reuse_stats.graphs_reused},
                {"tasks_run", reuse_stats.tasks_run},
                {"tasks_jumped", reuse_stats.tasks_jumped},
                {"configs_equivalent_to_an_earlier_one", reuse_stats.steps_reused},
                {"simulated_per_s_per_core_1_thread", per_core_1},
                {"simulated_per_s_per_core_all_threads", per_core_all},
                {"simulated_per_s_per_core_1_thread_every_graph", per_core_no_reuse},
                {"analytic_per_s", n / analytic_s}};
    nlohmann::json per_stage = nlohmann::json::object();
    for (int s = 0; s < 4; ++s) {
      if (stage_n[s] > 0) per_stage[std::to_string(s)] = stage_n[s] / stage_s[s];
    }
    j["raw"]["simulated_per_s_by_stage_every_graph"] = per_stage;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("plan_bench: %s on %d x %s, %d cores\n", model_name.c_str(), gpus, hw.c_str(), cores);
  std::printf("default search (plan(), end to end, %d runs):\n", runs);
  std::printf("  configs generated %zu, pruned %zu, simulated %zu, fitting %zu\n", st.generated,
              st.pruned, st.simulated, st.fitting);
  std::printf("  median wall time  %.3f s (min %.3f, max %.3f)   target < 2 s\n", median(wall),
              *std::min_element(wall.begin(), wall.end()),
              *std::max_element(wall.begin(), wall.end()));
  std::printf("raw evaluation as the search runs it: %zu configs, %zu pruned by the analytic "
              "bound, %zu simulated:\n",
              cands.size(), pruned_stats.pruned, pruned_stats.simulated);
  std::printf("  %zu of the simulated were equivalent to one already simulated (no graph built)\n",
              pruned_stats.steps_reused);
  std::printf("  graphs            %zu run through the engine, %zu identical to one already run\n",
              pruned_stats.graphs_run, pruned_stats.graphs_reused);
  std::printf("  tasks             %zu, of which %zu (%.0f%%) jumped over as repeats of a steady "
              "layer\n",
              pruned_stats.tasks_run, pruned_stats.tasks_jumped,
              100.0 * static_cast<double>(pruned_stats.tasks_jumped) /
                  static_cast<double>(std::max<size_t>(1, pruned_stats.tasks_run)));
  std::printf("  1 thread          %.3f s = %.0f configs/s per core   target >= 10000\n",
              pruned_one, n / pruned_one);
  std::printf("  %d threads         %.3f s = %.0f configs/s per core\n", cores, pruned_all,
              n / pruned_all / cores);
  std::printf("every config simulated (none pruned), %zu configs:\n", cands.size());
  std::printf("  configs           %zu equivalent to one already simulated (no graph built)\n",
              reuse_stats.steps_reused);
  std::printf("  graphs            %zu run through the engine, %zu identical to one already run\n",
              reuse_stats.graphs_run, reuse_stats.graphs_reused);
  std::printf("  tasks             %zu, of which %zu jumped over\n", reuse_stats.tasks_run,
              reuse_stats.tasks_jumped);
  std::printf("  1 thread          %.3f s = %.0f configs/s per core\n", one_thread, per_core_1);
  std::printf("  %d threads         %.3f s = %.0f configs/s per core\n", cores, all_threads,
              per_core_all);
  std::printf("  1 thread, every graph through the engine: %.3f s = %.0f configs/s per core\n",
              one_thread_no_reuse, per_core_no_reuse);
  std::printf("  by stage (1 thread, every graph):");
  for (int s = 0; s < 4; ++s) {
    if (stage_n[s] > 0)
      std::printf("  stage %d %.0f/s (%zu)", s, stage_n[s] / stage_s[s], stage_n[s]);
  }
  std::printf("\n  analytic bound    %.0f configs/s (%zu of %zu fit)\n", n / analytic_s,
              analytic / 5, cands.size());
  return 0;
}
