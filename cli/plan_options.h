// The options `zplan plan` (also plain `zplan`) and `zplan sweep` share: the setup flags (model,
// hardware, GPUs, sequence, precision), the global batch, one list flag per knob plus
// `--knob NAME=LIST`, and how to search (--headroom, --threads). Values are resolved into the
// planner's types; bad ones are InputErrors naming the flag.
#ifndef ZPLAN_CLI_PLAN_OPTIONS_H_
#define ZPLAN_CLI_PLAN_OPTIONS_H_

#include <array>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/common_options.h"
#include "planner/plan.h"
#include "sim/knobs.h"

namespace zplan::cli {

struct SearchCliOptions {
  SetupOptions setup;  // its ZeRO fields, micro_batch and checkpointing are not used
  std::optional<int64_t> global_batch_tokens;
  std::array<std::string, sim::kNumKnobs> knob_text;
  std::array<bool, sim::kNumKnobs> knob_given{};  // filled by capture_given()
  std::vector<std::string> knob_assignments;          // --knob NAME=LIST
  std::string autotp;  // --autotp LIST: AutoTP sizes to compare (empty: 1, off)
  std::string comm_variants = "all";  // --comm-variants all|lossless|none
  double headroom = planner::kDefaultHeadroom;
  int threads = 0;
  std::string report;
  bool force = false;
  bool json = false;
};

// Adds the shared options to `app` (a subcommand, or the main app for the plain `zplan` form).
void add_search_options(CLI::App& app, SearchCliOptions& options);
// Records which knob flags were given (an empty list given is an error, not "not given").
// Call from the command's callback, after parsing.
void capture_given(const CLI::App& app, SearchCliOptions& options);

struct ResolvedSearch {
  planner::Problem problem;  // the whole model, AutoTP off
  sim::KnobRequest knobs;
  planner::BatchRequest batch;
  std::vector<int> autotp_sizes = {1};  // --autotp, in the order given
  planner::CommSearch comm = planner::CommSearch::kAll;  // --comm-variants
};

// `problem` as it is planned with AutoTP of size `tp` (sim/tensor_parallel.h): its model one
// GPU's shard, its workload's tensor_parallel `tp`. Throws InputError naming --autotp when the
// model or the cluster cannot be split so. `problem` itself for tp 1.
planner::Problem autotp_problem(const planner::Problem& problem, int tp);

// Loads the model and profile and parses every knob list. Throws InputError naming the flag.
ResolvedSearch resolve_search(const SearchCliOptions& options);

// A progress bar on stderr when stderr is a terminal, else an empty function (quiet).
std::function<void(size_t done, size_t total)> progress_bar();

// "bf16, seq 2048, global batch 1024 samples (2.10 M tokens, default (about 2M tokens)) = 128
// per GPU"
std::string describe_search_batch(const planner::Problem& problem,
                                  const planner::SearchResult& search);
// "searched 1234 configurations: 456 pruned by the analytic memory bound, 778 simulated, 600
// fit with 5% headroom"
std::string describe_search_stats(const planner::Problem& problem,
                                  const planner::SearchResult& search);
// The same in JSON, as plan --json and sweep --json begin: model, cluster, workload, batch and
// search statistics.
nlohmann::json search_json(const planner::Problem& problem, const planner::SearchResult& search);
// A simulated candidate's step time, rates, MFU and what binds it, added to `j` (nothing for a
// candidate that was only pruned).
void add_performance_json(const planner::Evaluation& e, nlohmann::json* j);

}  // namespace zplan::cli

#endif  // ZPLAN_CLI_PLAN_OPTIONS_H_
