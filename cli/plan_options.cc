#include "cli/plan_options.h"

#include <cstdio>

#include <unistd.h>

#include "base/text.h"
#include "cli/describe.h"
#include "base/input_error.h"
#include "models/tensor_parallel.h"
#include "planner/text.h"
#include "sim/tensor_parallel.h"

namespace zplan::cli {

namespace {

using sim::Knob;

// Help for each knob flag, indexed by Knob.
constexpr const char* kKnobHelp[sim::kNumKnobs] = {
    "ZeRO stages to try, e.g. 1,2,3 or 2-3 (default: 0-3)",
    "optimizer offload devices: none,cpu,nvme (default: all three)",
    "parameter offload devices (stage 3): none,cpu,nvme (default: all three)",
    "micro-batches to try, e.g. 1,2,4 or 1-8 (default: the divisors of the per-GPU batch up to "
    "128k tokens)",
    "activation checkpointing: none, full or none,full (default: both)",
    "overlap_comm: true, false or true,false (default: both for stages 1-2, true for stage 3)",
    "reduce_bucket_size values (elements), e.g. 5e7,2e8,5e8 (default: 5e8 and hidden^2)",
    "allgather_bucket_size values (elements; stages 1-2) (default: 5e8)",
    "stage3_prefetch_bucket_size values (elements) (default: 5e7 and 0.9*hidden^2)",
    "stage3_max_live_parameters values (elements) (default: 1e9)",
    "stage3_param_persistence_threshold values (elements) (default: 1e5 and 10*hidden)",
    "sub_group_size values (elements; stage 3) (default: 1e9)",
};

}  // namespace

void add_search_options(CLI::App& app, SearchCliOptions& o) {
  add_setup_options(app, o.setup, /*zero_flags=*/false);
  // The planner takes lists where the single-config commands take one value.
  app.remove_option(app.get_option("--micro-batch"));
  app.remove_option(app.get_option("--checkpointing"));
  // Not an option of the search: taken only to say what to run instead (resolve_search).
  app.add_option("--ds-config", o.setup.ds_config)->group("");
  app.add_option("--global-batch-tokens", o.global_batch_tokens,
                 "global batch in tokens, rounded to whole samples per GPU (default: about 2M "
                 "tokens, the per-GPU share rounded to a power of two)");
  for (int i = 0; i < sim::kNumKnobs; ++i) {
    app.add_option(sim::knob_flag(static_cast<Knob>(i)), o.knob_text[i], kKnobHelp[i]);
  }
  app.add_option("--knob", o.knob_assignments,
                 "NAME=LIST for any knob of the grid by its ds_config name, e.g. "
                 "--knob stage3_max_live_parameters=1e8,1e9 (repeatable; ZeRO++ and MiCS: "
                 "--comm-variants)")
      ->take_all();
  app.add_option("--comm-variants", o.comm_variants,
                 "ZeRO++/MiCS variants of the best stage-3 configs tried on several nodes: all, "
                 "lossless (hpZ and MiCS, no quantized qwZ/qgZ) or none")
      ->capture_default_str();
  app.add_option("--autotp", o.autotp,
                 "AutoTP sizes to compare (tensor_parallel.autotp_size), e.g. 1,2,4: each "
                 "layer's weights split over that many GPUs of a node (default: 1, off)");
  app.add_option("--headroom", o.headroom,
                 "fraction of GPU, host and NVMe capacity a config must leave free")
      ->capture_default_str();
  app.add_option("--threads", o.threads,
                 "threads evaluating configs (default: every core); results never depend on it");
  app.add_option("--nvme-path", o.setup.nvme_path,
                 "nvme_path the written ds_config gives NVMe offload")
      ->capture_default_str();
  app.add_option("--report", o.report,
                 "also write a self-contained HTML report (scatter, memory, timeline) here");
  app.add_flag("--force", o.force, "replace existing output files");
  app.add_flag("--json", o.json, "print JSON instead of text");
}

void capture_given(const CLI::App& app, SearchCliOptions& o) {
  for (int i = 0; i < sim::kNumKnobs; ++i) {
    o.knob_given[i] = app.count(sim::knob_flag(static_cast<Knob>(i))) > 0;
  }
}

ResolvedSearch resolve_search(const SearchCliOptions& o) {
  if (o.threads < 0) throw InputError("--threads", "must be 0 (every core) or more");
  if (!o.setup.ds_config.empty()) {
    throw InputError("--ds-config",
                     "the planner searches the ZeRO settings and writes the ds_config itself; "
                     "to predict your own file run `zplan simulate --ds-config " +
                         o.setup.ds_config +
                         "` (or `zplan memory`), to plan around it give what it fixes as "
                         "flags (--stage, --micro-batch, --offload-optimizer, ...)");
  }
  ResolvedSearch r{
      planner::Problem{resolve_model(o.setup), resolve_cluster(o.setup), {}, {}, {}, o.headroom},
      {},
      {},
      {1},
      planner::CommSearch::kAll};
  r.problem.workload = resolve_workload(o.setup, r.problem.model);
  r.problem.precision = resolve_precision(o.setup, r.problem.cluster.profile.gpu);
  // plan names the attention it assumed among "before you run it" (planner/plan.cc).
  settle_remote_attention(o.setup, r.problem.model, r.problem.workload, r.problem.precision,
                          r.problem.cluster.profile.gpu);
  check_attention_runs(r.problem.workload.attention, r.problem.precision,
                       r.problem.cluster.profile.gpu, !r.problem.model.shape().qwen_names);
  if (o.setup.nvme_path.empty()) throw InputError("--nvme-path", "must not be empty");
  r.problem.nvme_path = o.setup.nvme_path;
  for (int i = 0; i < sim::kNumKnobs; ++i) {
    if (o.knob_given[i]) r.knobs.set_from_text(static_cast<Knob>(i), o.knob_text[i]);
  }
  for (const std::string& a : o.knob_assignments) r.knobs.set_from_assignment(a, "--knob");
  if (!o.autotp.empty()) {
    r.autotp_sizes.clear();
    for (int64_t v : sim::parse_knob_values(Knob::kMicroBatch, o.autotp, "--autotp")) {
      if (v > r.problem.cluster.gpus) {
        throw InputError("--autotp", std::to_string(v) + " is more than the " +
                                         std::to_string(r.problem.cluster.gpus) + " GPUs");
      }
      r.autotp_sizes.push_back(static_cast<int>(v));
    }
    // Each size's model and cluster checks, before any search.
    for (int tp : r.autotp_sizes) autotp_problem(r.problem, tp);
  }
  const std::string comm = ascii_lower(o.comm_variants);
  if (comm == "lossless") {
    r.comm = planner::CommSearch::kLossless;
  } else if (comm == "none") {
    r.comm = planner::CommSearch::kNone;
  } else if (comm != "all") {
    throw InputError("--comm-variants",
                     "must be all, lossless or none, got '" + o.comm_variants + "'");
  }
  r.batch.global_batch = o.setup.global_batch;
  r.batch.global_batch_tokens = o.global_batch_tokens;
  r.batch.gradient_accumulation = o.setup.gradient_accumulation;
  return r;
}

planner::Problem autotp_problem(const planner::Problem& problem, int tp) {
  if (tp == 1) return problem;
  planner::Problem p = problem;
  p.workload.tensor_parallel = tp;
  sim::DsConfig plain;  // no ZeRO++ or MiCS: the planner tries those only without AutoTP
  sim::check_tensor_parallel(problem.model, plain, p.workload, problem.cluster, "--autotp");
  if (problem.cluster.gpus % tp != 0) {
    throw InputError("--autotp", "AutoTP size " + std::to_string(tp) + " does not divide the " +
                                     std::to_string(problem.cluster.gpus) + " GPUs");
  }
  p.model = models::tensor_parallel_shard(problem.model, tp);
  return p;
}

std::function<void(size_t, size_t)> progress_bar() {
  if (!isatty(STDERR_FILENO)) return {};
  return [](size_t done, size_t total) {
    constexpr int kWidth = 30;
    if (done >= total) {
      std::fprintf(stderr, "\r\033[K");
      std::fflush(stderr);
      return;
    }
    int filled = total == 0 ? kWidth : static_cast<int>(kWidth * done / total);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(kWidth - filled), '.');
    std::fprintf(stderr, "\rzplan: evaluating [%s] %zu/%zu configs", bar.c_str(), done, total);
    std::fflush(stderr);
  };
}

std::string describe_search_batch(const planner::Problem& p, const planner::SearchResult& s) {
  const auto& b = s.space.batch;
  std::string text =
      strformat("%s, seq %lld, global batch %lld samples (%s tokens; %s) = %lld per GPU",
                sim::precision_name(p.precision), static_cast<long long>(p.workload.seq_len),
                static_cast<long long>(b.global_batch),
                planner::si(static_cast<double>(b.global_batch * p.workload.seq_len)).c_str(),
                b.origin.c_str(), static_cast<long long>(b.per_gpu));
  if (p.workload.tensor_parallel > 1) {
    // Each tensor-parallel group trains the same samples: "per GPU" is per data-parallel rank.
    text += strformat(" of %d data-parallel ranks, AutoTP %d",
                      sim::data_parallel_ranks(p.cluster, p.workload), p.workload.tensor_parallel);
  }
  return text;
}

std::string describe_search_stats(const planner::Problem& p, const planner::SearchResult& s) {
  return strformat(
      "searched %zu configurations: %zu pruned by the analytic memory bound, %zu "
      "simulated, %zu fit with %.0f%% headroom",
      s.stats.generated, s.stats.pruned, s.stats.simulated, s.stats.fitting, 100 * p.headroom);
}

void add_performance_json(const planner::Evaluation& e, nlohmann::json* j) {
  if (!e.simulated) return;
  (*j)["step_time_s"] = e.step_time_s;
  (*j)["samples_per_s"] = e.samples_per_s;
  (*j)["tokens_per_s"] = e.tokens_per_s;
  (*j)["tflops_per_gpu"] = e.tflops_per_gpu;
  (*j)["mfu"] = e.mfu;
  (*j)["binds"] = planner::what_binds(e);
}

nlohmann::json search_json(const planner::Problem& p, const planner::SearchResult& s) {
  nlohmann::json j;
  j["model"] = {{"name", p.model.name()}, {"params", p.model.whole_params()}};
  add_finetune_json(p.model, j["model"]);
  if (p.workload.tensor_parallel > 1) j["model"]["params_per_gpu"] = p.model.num_params();
  j["cluster"] = {{"hardware", p.cluster.profile.name},
                  {"gpu", p.cluster.profile.gpu.name},
                  {"gpus", p.cluster.gpus},
                  {"nodes", p.cluster.nodes}};
  j["workload"] = {{"seq_len", p.workload.seq_len},
                   {"attention", sim::attention_name(p.workload.attention)},
                   {"loss", p.workload.loss_name()},
                   {"precision", sim::precision_name(p.precision)}};
  if (p.workload.tensor_parallel > 1) {
    j["workload"]["autotp"] = {
        {"size", p.workload.tensor_parallel},
        {"data_parallel", sim::data_parallel_ranks(p.cluster, p.workload)}};
  }
  if (!p.workload.zero_init) j["workload"]["zero_init"] = false;
  j["batch"] = {{"global_batch", s.space.batch.global_batch},
                {"per_gpu", s.space.batch.per_gpu},
                {"origin", s.space.batch.origin}};
  j["search"] = {{"generated", s.stats.generated},
                 {"pruned", s.stats.pruned},
                 {"simulated", s.stats.simulated},
                 {"fitting", s.stats.fitting},
                 {"headroom", p.headroom}};
  return j;
}

}  // namespace zplan::cli
