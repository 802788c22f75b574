// `zplan sweep`: evaluate every configuration of a grid -- any knob as a list or range, the
// planner's default list for the others -- and print them all, fastest first, with the Pareto
// front of throughput against peak GPU memory marked: a table (default), --csv or --json. The
// output is byte-identical whatever --threads is (results are stored by index and sorted
// deterministically; no timings are printed).
#include <iostream>
#include <memory>

#include "base/text.h"
#include "base/units.h"
#include "cli/commands.h"
#include "cli/describe.h"
#include "cli/plan_options.h"
#include "cli/table.h"
#include "base/atomic_file.h"
#include "base/input_error.h"
#include "planner/report_html.h"
#include "planner/timeline.h"

namespace zplan::cli {

namespace {

using sim::Knob;

struct SweepCliOptions {
  SearchCliOptions search;
  bool csv = false;
  bool no_prune = false;
  int64_t top = 0;
};

constexpr int kGpu = static_cast<int>(sim::Tier::kGpu);
constexpr int kNvme = static_cast<int>(sim::Tier::kNvme);

// A short "what binds" cell: "compute 97%", "all-gather (bandwidth) 62%" or "CPU optimizer 23%".
std::string binds_cell(const planner::Evaluation& e) {
  if (!e.simulated || e.step_time_s <= 0) return "-";
  int worst = 0;
  for (int p = 1; p < sim::kNumPathParts; ++p) {
    if (e.critical_path_s[p] > e.critical_path_s[worst]) worst = p;
  }
  const double compute = e.critical_path_s[0] / e.step_time_s;
  if (sim::is_compute_bound(compute) || worst == 0) {
    return strformat("compute %.0f%%", 100 * compute);
  }
  return strformat("%s %.0f%%",
                   sim::bound_short(e.critical_path_s, e.critical_latency_s, e.step_time_s).c_str(),
                   100 * e.critical_path_s[worst] / e.step_time_s);
}

// Knob columns: in CSV and JSON all of them; in the table the core ones and any other knob
// whose list has more than one value.
std::vector<Knob> table_knobs(const planner::SearchSpace& space) {
  std::vector<Knob> out;
  for (int i = 0; i < sim::kNumKnobs; ++i) {
    Knob k = static_cast<Knob>(i);
    bool core = k == Knob::kStage || k == Knob::kOffloadOptimizer || k == Knob::kOffloadParam ||
                k == Knob::kMicroBatch || k == Knob::kCheckpointing;
    if (core || space.values[i].size() > 1) out.push_back(k);
  }
  return out;
}

const char* short_header(Knob k) {
  switch (k) {
    case Knob::kStage:
      return "stage";
    case Knob::kOffloadOptimizer:
      return "opt";
    case Knob::kOffloadParam:
      return "param";
    case Knob::kMicroBatch:
      return "mb";
    case Knob::kCheckpointing:
      return "ckpt";
    case Knob::kOverlapComm:
      return "overlap";
    case Knob::kReduceBucket:
      return "reduce";
    case Knob::kAllgatherBucket:
      return "allgather";
    case Knob::kPrefetchBucket:
      return "prefetch";
    case Knob::kMaxLive:
      return "max_live";
    case Knob::kPersistenceThreshold:
      return "persist";
    case Knob::kSubGroupSize:
      return "sub_group";
  }
  return "?";
}

std::string csv_value(Knob k, int64_t v) {
  if (k == Knob::kOffloadOptimizer || k == Knob::kOffloadParam || k == Knob::kCheckpointing ||
      k == Knob::kOverlapComm) {
    return sim::format_knob_value(k, v);
  }
  return std::to_string(v);
}

std::string csv_quote(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) {
    if (c == '"') o += '"';
    o += c;
  }
  return o + "\"";
}

void print_csv(std::ostream& out, const planner::SearchResult& s, const std::vector<size_t>& rows,
               const std::vector<bool>& on_front) {
  out << "rank";
  for (int i = 0; i < sim::kNumKnobs; ++i)
    out << ',' << sim::knob_name(static_cast<Knob>(i));
  // ZeRO++ / MiCS variants exist only on multi-node clusters (planner/comm_variants.h): their
  // column too, so that one-node tables keep their form.
  bool variants = false;
  for (size_t i : rows) variants = variants || !s.candidates[i].comm.plain();
  out << ",gradient_accumulation_steps,verdict,pareto,step_time_s,samples_per_s,tokens_per_s,"
         "tflops_per_gpu,mfu,gpu_peak_bytes,host_peak_bytes,nvme_peak_bytes,binds"
      << (variants ? ",zeropp_mics\n" : "\n");
  size_t rank = 0;
  for (size_t i : rows) {
    const planner::Candidate& c = s.candidates[i];
    const planner::Evaluation& e = s.evals[i];
    out << ++rank;
    for (int k = 0; k < sim::kNumKnobs; ++k)
      out << ',' << csv_value(static_cast<Knob>(k), c.v[k]);
    out << ',' << c.gas << ',' << planner::verdict_name(e.verdict) << ',' << (on_front[i] ? 1 : 0)
        << ',';
    if (e.simulated) {
      out << strformat("%.6f,%.4f,%.1f,%.3f,%.5f", e.step_time_s, e.samples_per_s, e.tokens_per_s,
                       e.tflops_per_gpu, e.mfu);
    } else {
      out << ",,,,";
    }
    out << strformat(",%lld,%lld,%lld,", std::llround(e.peak_bytes[kGpu]),
                     std::llround(e.host_peak_bytes), std::llround(e.peak_bytes[kNvme]))
        << csv_quote(e.simulated ? planner::what_binds(e) : "");
    if (variants) out << ',' << csv_quote(planner::comm_variant_words(c.comm));
    out << '\n';
  }
}

nlohmann::json row_json(const planner::SearchResult& s, size_t i, bool on_front, size_t rank) {
  const planner::Candidate& c = s.candidates[i];
  const planner::Evaluation& e = s.evals[i];
  nlohmann::json j;
  j["rank"] = rank;
  nlohmann::json k = nlohmann::json::object();
  for (int x = 0; x < sim::kNumKnobs; ++x) {
    Knob kn = static_cast<Knob>(x);
    std::string v = csv_value(kn, c.v[x]);
    if (kn == Knob::kOverlapComm) {
      k[sim::knob_name(kn)] = c.v[x] != 0;
    } else if (v == std::to_string(c.v[x])) {
      k[sim::knob_name(kn)] = c.v[x];
    } else {
      k[sim::knob_name(kn)] = v;
    }
  }
  k["gradient_accumulation_steps"] = c.gas;
  if (!c.comm.plain()) k["zeropp_mics"] = planner::comm_variant_words(c.comm);
  j["knobs"] = k;
  j["verdict"] = planner::verdict_name(e.verdict);
  j["pareto"] = on_front;
  add_performance_json(e, &j);
  j["gpu_peak_bytes"] = std::llround(e.peak_bytes[kGpu]);
  j["host_peak_bytes"] = std::llround(e.host_peak_bytes);
  j["nvme_peak_bytes"] = std::llround(e.peak_bytes[kNvme]);
  return j;
}

int run_sweep(const SweepCliOptions& o) {
  if (o.csv && o.search.json) throw InputError("--csv", "give --csv or --json, not both");
  if (o.top < 0)
    throw InputError("--top", "must be 0 (every row) or more, got " + std::to_string(o.top));
  if (!o.search.report.empty()) check_output_file(o.search.report, o.search.force);
  check_output_not_input("--report", o.search.report, setup_inputs(o.search.setup));
  ResolvedSearch rs = resolve_search(o.search);
  if (rs.autotp_sizes.size() > 1) {
    throw InputError("--autotp", "sweep takes one AutoTP size; plan compares several");
  }
  const planner::Problem p = autotp_problem(rs.problem, rs.autotp_sizes.front());
  planner::EvalOptions eo;
  eo.threads = o.search.threads;
  eo.comm = rs.comm;
  eo.prune = !o.no_prune;
  eo.progress = progress_bar();
  planner::SearchResult s = planner::run_search(p, rs.knobs, rs.batch, eo);
  print_notes(s.space.notes);

  std::vector<bool> on_front(s.candidates.size(), false);
  for (size_t i : s.pareto) on_front[i] = true;
  std::vector<size_t> rows = s.order;
  if (o.top > 0 && rows.size() > static_cast<size_t>(o.top)) rows.resize(o.top);

  std::optional<size_t> best;
  if (!s.order.empty() && s.evals[s.order[0]].fits()) best = s.order[0];
  if (!o.search.report.empty()) {
    planner::StepTimeline timeline;
    planner::ReportInput in;
    in.problem = &p;
    in.search = &s;
    in.chosen = best;
    std::string ds_json;
    if (best) {
      sim::DsConfig config = planner::config_of(p, s, *best);
      timeline = planner::capture_timeline(p, config);
      in.timeline = &timeline;
      ds_json = sim::ds_config_to_json(config).dump(2) + "\n";
    }
    in.title = "zplan sweep: " + describe_run(p.model, p.cluster);
    in.ds_config_json = ds_json;
    write_file_atomically(o.search.report, planner::render_report_html(in), o.search.force);
  }

  if (o.csv) {
    print_csv(std::cout, s, rows, on_front);
  } else if (o.search.json) {
    nlohmann::json j = search_json(p, s);
    nlohmann::json arr = nlohmann::json::array();
    size_t rank = 0;
    for (size_t i : rows) arr.push_back(row_json(s, i, on_front[i], ++rank));
    j["configs"] = arr;
    std::cout << j.dump(2) << '\n';
  } else {
    std::cout << "zplan sweep: " << describe_run(p.model, p.cluster) << '\n'
              << "  " << describe_search_batch(p, s) << '\n'
              << "  " << describe_search_stats(p, s) << "; * = Pareto front (tokens/s vs GPU "
              << "peak)\n\n";
    std::vector<Knob> knobs = table_knobs(s.space);
    std::vector<std::string> header = {"#"};
    std::vector<bool> right = {true};
    for (Knob k : knobs) {
      header.push_back(short_header(k));
      right.push_back(true);
      if (k == Knob::kMicroBatch) {
        header.push_back("gas");
        right.push_back(true);
      }
    }
    // The ZeRO++ / MiCS column only where the rows have variants, as in CSV, so that rows with the
    // same knobs are told apart and tables without them keep their form.
    bool variants = false;
    for (size_t i : rows) variants = variants || !s.candidates[i].comm.plain();
    if (variants) {
      header.push_back("ZeRO++ / MiCS");
      right.push_back(false);
    }
    for (const char* h : {"fits", "step s", "tokens/s", "TFLOP/s", "MFU%", "GPU GiB", "host GiB",
                          "NVMe GiB", "P", "time goes to"}) {
      header.push_back(h);
      right.push_back(std::string(h) != "fits" && std::string(h) != "time goes to" &&
                      std::string(h) != "P");
    }
    Table t(header, right);
    size_t rank = 0;
    for (size_t i : rows) {
      const planner::Candidate& c = s.candidates[i];
      const planner::Evaluation& e = s.evals[i];
      std::vector<std::string> cells = {std::to_string(++rank)};
      for (Knob k : knobs) {
        cells.push_back(sim::format_knob_value(k, c[k]));
        if (k == Knob::kMicroBatch) cells.push_back(std::to_string(c.gas));
      }
      if (variants) cells.push_back(c.comm.plain() ? "-" : planner::comm_variant_words(c.comm));
      const char* fits = e.fits()                                 ? "yes"
                         : e.verdict == planner::Verdict::kPruned ? "pruned"
                         : !e.fit.gpu_fits()                   ? "no: GPU"
                         : !e.fit.host_fits()                  ? "no: host"
                                                                  : "no: NVMe";
      cells.push_back(fits);
      if (e.simulated) {
        cells.push_back(strformat("%.2f", e.step_time_s));
        cells.push_back(strformat("%.0f", e.tokens_per_s));
        cells.push_back(strformat("%.1f", e.tflops_per_gpu));
        cells.push_back(strformat("%.1f", 100 * e.mfu));
      } else {
        for (int k = 0; k < 4; ++k) cells.push_back("-");
      }
      cells.push_back(strformat("%.1f", e.peak_bytes[kGpu] / kGiB));
      cells.push_back(strformat("%.1f", e.host_peak_bytes / kGiB));
      cells.push_back(e.peak_bytes[kNvme] > 0 ? strformat("%.1f", e.peak_bytes[kNvme] / kGiB)
                                              : "-");
      cells.push_back(on_front[i] ? "*" : "");
      cells.push_back(binds_cell(e));
      t.add_row(cells);
    }
    t.print(std::cout, "  ");
    if (rows.size() < s.order.size()) {
      std::cout << strformat("  (%zu more; --top 0 shows all)\n", s.order.size() - rows.size());
    }
    if (!o.search.report.empty()) std::cout << "report written to " << o.search.report << '\n';
  }
  return kExitOk;
}

}  // namespace

void setup_sweep_command(CLI::App& app, Action* action) {
  auto options = std::make_shared<SweepCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "sweep",
      "evaluate a grid of ZeRO configs (any knob as a list or range): table, CSV or "
      "JSON, with the Pareto front of throughput vs GPU memory");
  add_search_options(*sub, options->search);
  sub->add_flag("--csv", options->csv, "print CSV instead of a table");
  sub->add_flag("--no-prune", options->no_prune,
                "simulate configs the analytic memory bound rules out too (slower)");
  sub->add_option("--top", options->top, "print only the first N rows (0: all)")
      ->capture_default_str();
  sub->callback([options, action, sub] {
    capture_given(*sub, options->search);
    *action = [options] { return run_sweep(*options); };
  });
}

}  // namespace zplan::cli
