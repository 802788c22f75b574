// `zplan simulate`: one optimizer step of one configuration, simulated event by event: step time,
// throughput, TFLOP/s and MFU, where the time goes, memory per tier, and a Perfetto trace.
#include <algorithm>
#include <iostream>
#include <memory>

#include "base/text.h"
#include "base/units.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/describe.h"
#include "cli/table.h"
#include "planner/text.h"
#include "base/atomic_file.h"
#include "base/input_error.h"
#include "sim/simulate.h"
#include "sim/trace_writer.h"

namespace zplan::cli {

namespace {

struct SimulateCliOptions {
  SetupOptions setup;
  bool json = false;
  std::string trace;
  bool force = false;
  bool every_micro_step = false;
};

nlohmann::json breakdown_json(const sim::MemoryBreakdown& b) {
  nlohmann::json j = nlohmann::json::object();
  for (int c = 0; c < sim::kNumCategories; ++c) {
    if (b.bytes[c] != 0) j[sim::category_name(static_cast<sim::Category>(c))] = std::llround(b.bytes[c]);
  }
  return j;
}

nlohmann::json result_json(const sim::StepResult& r) {
  nlohmann::json j;
  j["step_time_s"] = r.step_time_s;
  j["micro_step_s"] = r.micro_step_s;
  j["micro_step_repeats"] = r.micro_step_repeats;
  j["optimizer_step_s"] = r.optimizer_step_s;
  j["samples_per_s"] = r.samples_per_s;
  j["tokens_per_s"] = r.tokens_per_s;
  j["tflops_per_gpu"] = r.tflops_per_gpu;
  j["mfu"] = r.mfu;
  j["hfu"] = r.hfu;
  j["bottleneck"] = r.bottleneck();
  j["bound"] = r.bound();
  nlohmann::json path = nlohmann::json::object();
  nlohmann::json latency = nlohmann::json::object();
  for (int i = 0; i < sim::kNumPathParts; ++i) {
    path[sim::path_part_name(static_cast<sim::PathPart>(i))] = r.critical_path_s[i];
    latency[sim::path_part_name(static_cast<sim::PathPart>(i))] = r.critical_latency_s[i];
  }
  j["critical_path_s"] = path;
  j["critical_latency_s"] = latency;
  // How many collectives one optimizer step launches, and their mean size (nccl-tests' S).
  nlohmann::json coll = nlohmann::json::object();
  for (int k = 0; k < sim::kNumTaskKinds; ++k) {
    if (!sim::is_collective(static_cast<sim::TaskKind>(k)) || r.tasks_by_kind[k] <= 0) continue;
    coll[sim::task_kind_name(static_cast<sim::TaskKind>(k))] = {
        {"count", std::llround(r.tasks_by_kind[k])},
        {"mean_bytes", std::llround(r.bytes_by_kind[k] / r.tasks_by_kind[k])}};
  }
  j["collectives_per_step"] = coll;
  nlohmann::json res = nlohmann::json::object();
  for (int i = 0; i < sim::kNumResources; ++i) {
    res[sim::resource_name(static_cast<sim::Resource>(i))] = {
        {"busy_s", r.resources[i].busy_s}, {"exposed_s", r.resources[i].exposed_s}};
  }
  j["resources"] = res;
  j["wire_bytes_per_rank"] = std::llround(r.wire_bytes);
  nlohmann::json mem = nlohmann::json::object();
  for (int t = 0; t < sim::kNumTiers; ++t) {
    mem[sim::tier_name(static_cast<sim::Tier>(t))] = {{"peak_bytes", std::llround(r.peak_bytes[t])},
                                                     {"at_peak", breakdown_json(r.at_peak[t])},
                                                     {"steady", breakdown_json(r.steady[t])}};
  }
  if (r.gpu_peak_at_init) mem["gpu"]["peak_phase"] = sim::phase_name(sim::Phase::kInit);
  j["memory"] = mem;
  j["fits"] = r.fit.fits();
  j["tasks"] = r.tasks;
  j["events"] = r.events;
  return j;
}

void print_result(std::ostream& out, const Setup& s, const sim::StepResult& r) {
  out << strformat("  step time        %.3f s (micro-steps:", r.step_time_s);
  // Runs of micro-steps that print the same are one "N x": the same text whether they were
  // simulated once and repeated, or one by one (--trace, --every-micro-step).
  for (size_t i = 0; i < r.micro_step_s.size();) {
    const std::string text = strformat(" %.3f s", r.micro_step_s[i]);
    int repeats = r.micro_step_repeats[i];
    size_t j = i + 1;
    for (; j < r.micro_step_s.size() && strformat(" %.3f s", r.micro_step_s[j]) == text; ++j) {
      repeats += r.micro_step_repeats[j];
    }
    if (repeats > 1) out << ' ' << repeats << " x";
    out << text;
    i = j;
  }
  out << strformat("; optimizer step %.3f s)\n", r.optimizer_step_s);
  out << strformat("  throughput       %.2f samples/s, %.0f tokens/s\n", r.samples_per_s,
                   r.tokens_per_s);
  const double peak = r.peak_flops_per_s;
  const FlopsUnit unit = flops_unit(peak);
  const bool giga = unit.per_tflop != 1;  // a GFLOP/s peak keeps a decimal
  out << strformat("  %s per GPU  %.1f (MFU %.1f%%, HFU %.1f%%, peak %.*f %s)\n", unit.name,
                   unit.per_tflop * r.tflops_per_gpu, 100 * r.mfu, 100 * r.hfu, giga ? 1 : 0,
                   unit.per_tflop * peak / 1e12, unit.name);
  out << "  critical path    " << r.bottleneck() << " of the step\n";
  out << "  verdict          " << r.bound() << "\n\n";
  Table t({"resource", "busy s", "exposed s", "busy %"}, {false, true, true, true});
  for (int i = 0; i < sim::kNumResources; ++i) {
    const sim::ResourceUse& u = r.resources[i];
    if (u.busy_s <= 0) continue;
    t.add_row({sim::resource_name(static_cast<sim::Resource>(i)), strformat("%.3f", u.busy_s),
               i == 0 ? "-" : strformat("%.3f", u.exposed_s),
               strformat("%.0f", 100 * u.busy_s / r.step_time_s)});
  }
  t.print(out, "  ");
  // Two measures of communication, each named for what it is (sim/simulate.h bottleneck()).
  bool streams = false;
  for (int i = 1; i < sim::kNumResources; ++i) streams = streams || r.resources[i].busy_s > 0;
  if (streams) {
    out << "  (exposed: ran while the compute stream was idle; the critical path above counts "
           "each task the step waited on whole, overlapped or not)\n";
  }
  if (r.wire_bytes > 0) {
    out << strformat("\n  collectives send %.2f GB per rank per step:", r.wire_bytes / 1e9);
    for (int k = 0; k < sim::kNumTaskKinds; ++k) {
      if (r.wire_bytes_by_kind[k] > 0) {
        out << strformat(" %s %.2f GB", sim::task_kind_name(static_cast<sim::TaskKind>(k)),
                         r.wire_bytes_by_kind[k] / 1e9);
      }
    }
    out << '\n';
  }
  out << "\n  memory (simulated peak over the step; GPU per GPU, host and NVMe per node):\n";
  static const char* const kNames[sim::kNumTiers] = {"GPU", "pinned host", "host", "NVMe"};
  for (int tier = 0; tier < sim::kNumTiers; ++tier) {
    if (r.peak_bytes[tier] <= 0) continue;
    const sim::MemoryBreakdown& b = r.at_peak[tier];
    std::string parts;
    for (int c = 0; c < sim::kNumCategories; ++c) {
      if (b.bytes[c] / r.peak_bytes[tier] < 0.005) continue;
      if (!parts.empty()) parts += ", ";
      parts += strformat("%s %.1f", planner::category_words(c, s.config.precision, s.config.optimizer.master_dtype).c_str(),
                         b.bytes[c] / kGiB);
    }
    out << strformat("    %-12s %7.1f GiB  (%s)\n", kNames[tier], r.peak_bytes[tier] / kGiB,
                     parts.c_str());
    if (tier == 0 && r.gpu_peak_at_init) {
      out << "                 at deepspeed.initialize: the whole model on the GPU before "
             "stage 3 partitions it (built outside zero.Init)\n";
    }
  }
  // The verdict takes the larger of the simulated peak and the analytic bound (zplan memory's
  // per-phase peaks), as the planner does.
  const sim::MemoryFit& fit = r.fit;
  const double gpu_peak = fit.peak.gpu;
  const double host_peak = fit.peak.host;
  const double nvme_peak = fit.peak.nvme;
  if (gpu_peak > r.peak_bytes[0]) {
    out << strformat("    the analytic bound (zplan memory) is higher: GPU %.1f GiB at %s\n",
                     gpu_peak / kGiB, sim::phase_name(r.analytic.tiers[0].peak_phase));
  }
  if (fit.fits()) {
    out << strformat("  fits: GPU %.1f of %.1f GiB, host %.1f of %.0f GiB per node%s\n",
                     gpu_peak / kGiB, fit.capacity.gpu / kGiB, host_peak / kGiB,
                     fit.capacity.host / kGiB,
                     headroom_remark({{"GPU", gpu_peak, fit.capacity.gpu},
                                      {"host", host_peak, fit.capacity.host},
                                      {"NVMe", nvme_peak, fit.capacity.nvme}})
                         .c_str());
  } else {
    out << "  DOES NOT FIT:";
    if (!fit.gpu_fits()) {
      const sim::MemoryBreakdown& at =
          gpu_peak > r.peak_bytes[0] ? r.analytic.tiers[0].at_peak : r.at_peak[0];
      sim::Category dom = at.dominant();
      out << strformat(" GPU short by %.1f GiB (peak %.1f of %.1f GiB; %s dominate, %.0f%%)",
                       fit.over.gpu / kGiB, gpu_peak / kGiB, fit.capacity.gpu / kGiB,
                       planner::category_words(static_cast<int>(dom), s.config.precision,
                                               s.config.optimizer.master_dtype)
                           .c_str(),
                       100 * at[dom] / gpu_peak);
    }
    if (!fit.host_fits()) {
      out << strformat(" host short by %.1f GiB per node", fit.over.host / kGiB);
    }
    if (!fit.nvme_fits()) {
      out << strformat(" NVMe short by %.1f GiB per node", fit.over.nvme / kGiB);
    }
    out << "\n  (the times above are what the step would take if it fit)\n";
  }
  out << strformat("  simulated %zu tasks, %llu events\n", r.tasks,
                   static_cast<unsigned long long>(r.events));
}

int run_simulate(const SimulateCliOptions& o) {
  if (!o.trace.empty()) check_output_file(o.trace, o.force);
  check_output_not_input("--trace", o.trace, setup_inputs(o.setup));
  Setup s = resolve_setup(o.setup);
  print_notes(s.notes);
  sim::SimulateOptions so;
  so.every_micro_step = o.every_micro_step;
  std::unique_ptr<sim::TraceWriter> trace;
  if (!o.trace.empty()) {
    trace = std::make_unique<sim::TraceWriter>(s.rank_model());
    so.trace = trace.get();
  }
  sim::StepResult r = sim::simulate_step(s.rank_model(), s.cluster, s.config, s.workload, so);
  if (trace) write_file_atomically(o.trace, trace->json(), o.force);
  if (o.json) {
    nlohmann::json j = setup_to_json(s);
    j["result"] = result_json(r);
    std::cout << j.dump(2) << '\n';
    return kExitOk;
  }
  std::cout << "zplan simulate: " << describe_run(s.model, s.cluster) << '\n'
            << "  " << describe_config(s.config, s.workload) << '\n'
            << "  zero_optimization: " << describe_zero_knobs(s.config) << "\n\n";
  print_result(std::cout, s, r);
  if (trace) std::cout << "  trace written to " << o.trace << " (open it in ui.perfetto.dev)\n";
  return kExitOk;
}

}  // namespace

void setup_simulate_command(CLI::App& app, Action* action) {
  auto options = std::make_shared<SimulateCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "simulate", "simulate one optimizer step: time, throughput, where time goes, memory, trace");
  add_setup_options(*sub, options->setup, /*zero_flags=*/true);
  sub->add_flag("--json", options->json, "print JSON instead of tables");
  sub->add_option("--trace", options->trace,
                  "write a Chrome/Perfetto trace of the step (every micro-step) to this file");
  sub->add_flag("--force", options->force, "replace an existing --trace file");
  sub->add_flag("--every-micro-step", options->every_micro_step,
                "simulate all micro-steps instead of the distinct ones (same result, slower)");
  sub->callback([options, action] { *action = [options] { return run_simulate(*options); }; });
}

}  // namespace zplan::cli
