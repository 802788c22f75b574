// `zplan plan` (and plain `zplan` with the same options): search the ZeRO configurations of a
// model on a cluster, recommend the fastest that fits, explain why it wins and why the next best
// lose, write a runnable ds_config.json, and say what it needs outside the file. When nothing
// fits: say so, name the nearest miss and what would fit, and exit 3.
#include <cmath>
#include <iostream>
#include <memory>

#include "base/text.h"
#include "base/units.h"
#include "cli/commands.h"
#include "cli/describe.h"
#include "cli/plan_options.h"
#include "cli/table.h"
#include "hardware/cost_model.h"
#include "base/atomic_file.h"
#include "base/input_error.h"
#include "planner/launch.h"
#include "planner/report_html.h"
#include "planner/text.h"
#include "planner/timeline.h"

namespace zplan::cli {

namespace {

using sim::Knob;

struct PlanCliOptions {
  SearchCliOptions search;
  std::string out = "ds_config.json";
  std::string out_format = "deepspeed";
  double offload_margin = planner::kDefaultOffloadMargin;
  double lossy_margin = planner::kDefaultLossyMargin;
};

constexpr int kGpu = static_cast<int>(sim::Tier::kGpu);
constexpr int kPinned = static_cast<int>(sim::Tier::kPinnedHost);
constexpr int kHost = static_cast<int>(sim::Tier::kHost);
constexpr int kNvme = static_cast<int>(sim::Tier::kNvme);

// "activations 24.1, optimizer states 19.1, ..." (GiB), largest first, parts over 0.5%.
std::string breakdown_text(const sim::MemoryBreakdown& b, sim::Precision precision) {
  std::vector<std::pair<double, int>> parts;
  for (int c = 0; c < sim::kNumCategories; ++c) parts.emplace_back(b.bytes[c], c);
  std::stable_sort(parts.begin(), parts.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  std::string s;
  const double total = b.total();
  for (const auto& [bytes, c] : parts) {
    if (total <= 0 || bytes / total < 0.005) continue;
    if (!s.empty()) s += ", ";
    s += strformat("%s %.1f", planner::category_words(c, precision).c_str(), bytes / kGiB);
  }
  return s;
}

nlohmann::json knobs_json(const planner::Candidate& c) {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < sim::kNumKnobs; ++i) {
    Knob k = static_cast<Knob>(i);
    if (k == Knob::kOverlapComm) {
      j[sim::knob_name(k)] = c[k] != 0;
    } else if (k == Knob::kOffloadOptimizer || k == Knob::kOffloadParam ||
               k == Knob::kCheckpointing) {
      j[sim::knob_name(k)] = sim::format_knob_value(k, c[k]);
    } else {
      j[sim::knob_name(k)] = c[k];
    }
  }
  j["gradient_accumulation_steps"] = c.gas;
  return j;
}

nlohmann::json breakdown_json(const sim::MemoryBreakdown& b) {
  nlohmann::json j = nlohmann::json::object();
  for (int c = 0; c < sim::kNumCategories; ++c) {
    if (b.bytes[c] != 0) {
      j[sim::category_name(static_cast<sim::Category>(c))] = std::llround(b.bytes[c]);
    }
  }
  return j;
}

nlohmann::json eval_json(const planner::Problem& p, const planner::Candidate& c,
                         const planner::Evaluation& e) {
  nlohmann::json j;
  j["description"] = planner::short_description(c);
  j["knobs"] = knobs_json(c);
  j["verdict"] = planner::verdict_name(e.verdict);
  add_performance_json(e, &j);
  nlohmann::json mem;
  mem["gpu"] = {{"peak_bytes", std::llround(e.peak_bytes[kGpu])},
                {"capacity_bytes", std::llround(p.cluster.profile.gpu.memory_bytes)},
                {"at_peak", breakdown_json(e.at_peak[kGpu])}};
  sim::MemoryBreakdown host = e.at_peak[kPinned];
  host += e.at_peak[kHost];
  mem["host_per_node"] = {
      {"peak_bytes", std::llround(e.host_peak_bytes)},
      {"pinned_peak_bytes", std::llround(e.peak_bytes[kPinned])},
      {"capacity_bytes", std::llround(p.cluster.profile.node.host_memory_bytes)},
      {"at_peak", breakdown_json(host)}};
  mem["nvme_per_node"] = {
      {"peak_bytes", std::llround(e.peak_bytes[kNvme])},
      {"capacity_bytes", std::llround(p.cluster.profile.node.nvme_capacity_bytes)},
      {"at_peak", breakdown_json(e.at_peak[kNvme])}};
  j["memory"] = mem;
  if (!e.fits()) j["shortfall"] = planner::shortfall(p, e);
  return j;
}

void print_memory(std::ostream& out, const planner::Problem& p, const planner::Evaluation& e) {
  const auto& prof = p.cluster.profile;
  out << strformat("  memory           GPU   %6.1f of %6.1f GiB per GPU   (%s)\n",
                   e.peak_bytes[kGpu] / kGiB, prof.gpu.memory_bytes / kGiB,
                   breakdown_text(e.at_peak[kGpu], p.precision).c_str());
  sim::MemoryBreakdown host = e.at_peak[kPinned];
  host += e.at_peak[kHost];
  out << strformat("                   host  %6.1f of %6.0f GiB per node  (%s)\n",
                   e.host_peak_bytes / kGiB, prof.node.host_memory_bytes / kGiB,
                   breakdown_text(host, p.precision).c_str());
  if (e.peak_bytes[kNvme] > 0) {
    out << strformat("                   NVMe  %6.1f of %6.0f GiB per node  (%s)\n",
                     e.peak_bytes[kNvme] / kGiB, prof.node.nvme_capacity_bytes / kGiB,
                     breakdown_text(e.at_peak[kNvme], p.precision).c_str());
  }
}

void print_text(std::ostream& out, const planner::Problem& p, const planner::PlanResult& r,
                const std::string& written) {
  const planner::SearchResult& s = r.search;
  out << "zplan plan: " << describe_run(p.model, p.cluster) << '\n'
      << "  " << describe_search_batch(p, s) << '\n'
      << "  " << describe_search_stats(p, s) << "\n\n";
  if (!r.recommended) {
    out << strformat(
        "NOTHING FITS: no configuration searched fits %d x %s with %.0f%% "
        "headroom.\n",
        p.cluster.gpus, p.cluster.profile.gpu.name.c_str(), 100 * p.headroom);
    if (r.closest) {
      out << "  nearest: " << planner::short_description(s.candidates[*r.closest]) << "\n"
          << "           " << planner::shortfall(p, s.evals[*r.closest]) << '\n';
    }
    if (!r.what_would_fit.empty()) {
      out << "  what would fit:\n";
      for (const std::string& line : r.what_would_fit) out << "    - " << line << '\n';
    }
    for (const std::string& n : r.notes) out << "  note: " << n << '\n';
    out << "  no ds_config written.\n";
    return;
  }
  const size_t i = *r.recommended;
  const planner::Candidate& c = s.candidates[i];
  const planner::Evaluation& e = s.evals[i];
  out << "recommended: " << planner::short_description(c) << '\n';
  out << "  zero_optimization  " << describe_zero_knobs(*r.recommended_config) << '\n';
  out << strformat("  step time        %.2f s\n", e.step_time_s);
  out << strformat("  throughput       %.2f samples/s, %.0f tokens/s\n", e.samples_per_s,
                   e.tokens_per_s);
  const FlopsUnit unit = flops_unit(
      hardware::peak_flops_per_s(p.cluster.profile.gpu, sim::precision_bytes(p.precision)));
  out << strformat("  %s per GPU  %.1f (MFU %.1f%%)\n", unit.name,
                   unit.per_tflop * e.tflops_per_gpu, 100 * e.mfu);
  print_memory(out, p, e);
  out << "  why it wins      " << r.why << '\n';
  for (const std::string& n : r.notes) out << "  note             " << n << '\n';
  if (!r.alternatives.empty()) {
    out << "\nalternatives:\n";
    Table t({"config", "tokens/s", "GPU peak", "why it loses"}, {false, true, true, false});
    for (const planner::Alternative& a : r.alternatives) {
      const planner::Evaluation& ea = s.evals[a.index];
      t.add_row({planner::short_description(s.candidates[a.index]),
                 ea.simulated ? strformat("%.0f", ea.tokens_per_s) : "-",
                 strformat("%.1f GiB", ea.peak_bytes[kGpu] / kGiB), a.why});
    }
    t.print(out, "  ");
  }
  out << "\nwrote " << written << "\nbefore you run it:\n";
  for (const std::string& n : r.needs) out << "  - " << n << '\n';
}

int run_plan(const PlanCliOptions& o) {
  if (o.out.empty()) throw InputError("--out", "must not be empty");
  for (const auto& [flag, margin] :
       {std::pair<const char*, double>{"--offload-margin", o.offload_margin},
        {"--lossy-margin", o.lossy_margin}}) {
    if (!(margin >= 0) || !std::isfinite(margin)) {
      throw InputError(flag, strformat("must be a fraction >= 0, got %g", margin));
    }
  }
  // The inputs first (a wrong flag is the error to report; resolving the space is cheap), then
  // the outputs, before searching.
  ResolvedSearch rs = resolve_search(o.search);
  planner::resolve_search_space(rs.problem, rs.knobs, rs.batch);
  check_output_file(o.out, o.search.force);
  if (!o.search.report.empty()) check_output_file(o.search.report, o.search.force);
  check_output_not_input("--out", o.out, setup_inputs(o.search.setup));
  check_output_not_input("--report", o.search.report, setup_inputs(o.search.setup));
  if (!o.search.report.empty() && same_file(o.out, o.search.report)) {
    throw InputError("--report", o.search.report + " is also --out, where the ds_config goes");
  }
  planner::DsConfigFormat format = planner::DsConfigFormat::kDeepSpeed;
  if (o.out_format == "hf") {
    format = planner::DsConfigFormat::kHf;
  } else if (o.out_format != "deepspeed") {
    throw InputError("--out-format", "must be deepspeed or hf, got \"" + o.out_format + "\"");
  }
  planner::PlanOptions po;
  po.ds_config_format = format;
  po.eval.threads = o.search.threads;
  po.eval.comm = rs.comm;
  po.eval.progress = progress_bar();
  po.offload_margin = o.offload_margin;
  po.lossy_margin = o.lossy_margin;
  po.ds_config_file = o.out;
  // AutoTP is the user's choice: with several sizes (--autotp 1,2,4) each is planned as a
  // problem of its own -- the model one GPU's shard, ZeRO over the GPUs / tp, the same global
  // batch -- and the fastest recommendation wins; the sizes' outcomes are its first note.
  planner::Problem p = autotp_problem(rs.problem, rs.autotp_sizes.front());
  planner::PlanResult r = planner::plan(p, rs.knobs, rs.batch, po);
  if (rs.autotp_sizes.size() > 1) {
    std::vector<std::string> outcomes;
    for (size_t k = 0; k < rs.autotp_sizes.size(); ++k) {
      const int tp = rs.autotp_sizes[k];
      planner::Problem pk = k == 0 ? p : autotp_problem(rs.problem, tp);
      planner::PlanResult rk = k == 0 ? r : planner::plan(pk, rs.knobs, rs.batch, po);
      if (rk.recommended) {
        const planner::Evaluation& e = rk.search.evals[*rk.recommended];
        outcomes.push_back(strformat("AutoTP %d: %.0f tokens/s (%s)", tp, e.tokens_per_s,
                                     planner::short_description(
                                         rk.search.candidates[*rk.recommended])
                                         .c_str()));
        const bool faster =
            !r.recommended || e.tokens_per_s > r.search.evals[*r.recommended].tokens_per_s;
        if (k > 0 && faster) {
          p = std::move(pk);
          r = std::move(rk);
        }
      } else {
        std::string nearest;
        if (rk.closest) {
          nearest = ", nearest " + planner::shortfall(pk, rk.search.evals[*rk.closest]);
        }
        outcomes.push_back(strformat("AutoTP %d: nothing fits", tp) + nearest);
        // While no size fits, the advice is the nearest miss's: the size whose closest config
        // overshoots least (the search's own rank of misses, planner::rank_order).
        const bool nearer =
            !r.recommended && rk.closest &&
            (!r.closest || rk.search.evals[*rk.closest].fit.worst_over_fraction() <
                               r.search.evals[*r.closest].fit.worst_over_fraction());
        if (k > 0 && nearer) {
          p = std::move(pk);
          r = std::move(rk);
        }
      }
    }
    std::string why = "AutoTP sizes tried: ";
    for (size_t k = 0; k < outcomes.size(); ++k) why += (k > 0 ? "; " : "") + outcomes[k];
    if (r.recommended) {
      why += strformat(" -> AutoTP %d is the fastest that fits", p.workload.tensor_parallel);
    }
    r.notes.insert(r.notes.begin(), why);
  }
  const planner::SearchResult& s = r.search;
  print_notes(s.space.notes);

  std::string ds_json_text;
  std::string written;
  if (r.recommended) {
    const planner::Candidate& c = s.candidates[*r.recommended];
    // The file adds what a job needs beyond the keys the prediction reads (planner/launch.h).
    sim::DsConfig config = planner::runnable_config(*r.recommended_config, format);
    // What is written must read back as the same batch split (validate round-trips it through
    // parse_ds_config).
    sim::validate_ds_config(config, p.cluster.gpus, "recommended ds_config");
    ds_json_text = sim::ds_config_to_json(config).dump(2) + "\n";
    write_file_atomically(o.out, ds_json_text, o.search.force);
    // With AutoTP the file counts every GPU (sim::ds_config_to_json), as DeepSpeed does without
    // an mpu; a step trains 1/tp of that.
    const int tp = p.workload.tensor_parallel;
    written = o.out + " (" + planner::family_name(c) +
              strformat(", train_batch_size %lld = micro-batch %lld x gas %lld x %d GPUs",
                        static_cast<long long>(config.train_batch_size * tp),
                        static_cast<long long>(config.micro_batch),
                        static_cast<long long>(config.gradient_accumulation_steps), p.cluster.gpus);
    if (tp > 1) {
      written += strformat(", AutoTP %d: %lld samples per step", tp,
                           static_cast<long long>(config.train_batch_size));
    }
    written += ")";
  }
  if (!o.search.report.empty()) {
    planner::StepTimeline timeline;
    planner::ReportInput in;
    in.problem = &p;
    in.search = &s;
    in.plan = &r;
    in.chosen = r.recommended;
    if (r.recommended) {
      timeline = planner::capture_timeline(p, *r.recommended_config);
      in.timeline = &timeline;
    }
    in.title = "zplan plan: " + describe_run(p.model, p.cluster);
    in.ds_config_json = ds_json_text;
    write_file_atomically(o.search.report, planner::render_report_html(in), o.search.force);
  }
  if (o.search.json) {
    nlohmann::json j = search_json(p, s);
    j["search"]["offload_margin"] = o.offload_margin;
    j["search"]["lossy_margin"] = o.lossy_margin;
    if (r.recommended) {
      const size_t i = *r.recommended;
      nlohmann::json rec = eval_json(p, s.candidates[i], s.evals[i]);
      rec["why"] = r.why;
      rec["ds_config"] = nlohmann::json::parse(ds_json_text);
      rec["ds_config_file"] = o.out;
      rec["ds_config_format"] = planner::ds_config_format_name(format);
      rec["launch"] = planner::launch_commands_json(
          planner::launch_commands(p, *r.recommended_config, o.out, format));
      j["recommended"] = rec;
      nlohmann::json alts = nlohmann::json::array();
      for (const planner::Alternative& a : r.alternatives) {
        nlohmann::json x = eval_json(p, s.candidates[a.index], s.evals[a.index]);
        x["why_it_loses"] = a.why;
        alts.push_back(x);
      }
      j["alternatives"] = alts;
      j["needs"] = r.needs;
      j["notes"] = r.notes;
    } else {
      j["recommended"] = nullptr;
      if (r.closest) j["nearest"] = eval_json(p, s.candidates[*r.closest], s.evals[*r.closest]);
      j["what_would_fit"] = r.what_would_fit;
      j["notes"] = r.notes;
    }
    std::cout << j.dump(2) << '\n';
  } else {
    print_text(std::cout, p, r, written);
    if (!o.search.report.empty()) std::cout << "report written to " << o.search.report << '\n';
  }
  return r.recommended ? kExitOk : kExitNoFit;
}

void add_plan_options(CLI::App& app, PlanCliOptions& o) {
  add_search_options(app, o.search);
  app.add_option("--out", o.out, "where to write the recommended ds_config.json")
      ->capture_default_str();
  app.add_option("--out-format", o.out_format,
                 "who reads the written file: deepspeed (every value written; starts under any "
                 "launcher) or hf (the Hugging Face Trainer's form: the optimizer's "
                 "hyper-parameters \"auto\", taken from the Trainer's flags)")
      ->capture_default_str();
  app.add_option("--offload-margin", o.offload_margin,
                 "how much faster (fraction) an offloading config must be to be recommended "
                 "over one that offloads less")
      ->capture_default_str();
  app.add_option("--lossy-margin", o.lossy_margin,
                 "how much faster (fraction) a config with quantized communication (ZeRO++ qwZ, "
                 "qgZ) must be to be recommended over the best lossless one")
      ->capture_default_str();
}

}  // namespace

void setup_plan_command(CLI::App& app, Action* action) {
  auto options = std::make_shared<PlanCliOptions>();
  CLI::App* sub =
      app.add_subcommand("plan",
                         "recommend the fastest ZeRO config that fits and write its ds_config.json "
                         "(also what plain `zplan --model ... --gpus ... --hw ...` does)");
  add_plan_options(*sub, *options);
  sub->callback([options, action, sub] {
    capture_given(*sub, options->search);
    *action = [options] { return run_plan(*options); };
  });

  // Plain `zplan --model 20b --gpus 8 --hw a100` plans too: the same options on the main app,
  // not required there (they would be for every subcommand), checked when no subcommand ran.
  auto main_options = std::make_shared<PlanCliOptions>();
  add_plan_options(app, *main_options);
  for (const char* name : {"--model", "--hw", "--gpus"}) app.get_option(name)->required(false);
  CLI::App* main_app = &app;
  app.callback([main_app, main_options, action] {
    if (!main_app->get_subcommands().empty()) return;
    bool any = false;
    for (const CLI::Option* opt : main_app->get_options()) any = any || opt->count() > 0;
    if (!any) return;  // bare `zplan`: main() says "no command given"
    for (const char* name : {"--model", "--hw", "--gpus"}) {
      if (main_app->count(name) == 0) throw CLI::RequiredError(name);
    }
    capture_given(*main_app, main_options->search);
    *action = [main_options] { return run_plan(*main_options); };
  });
}

}  // namespace zplan::cli
