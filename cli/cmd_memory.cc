// `zplan memory`: the analytic memory breakdown of one configuration (--ds-config or ZeRO flags),
// or of every stage and offload combination when none is given; `--compat deepspeed-estimator`
// prints DeepSpeed's own estimator numbers for the same model and GPUs instead.
#include <iostream>
#include <memory>

#include "base/text.h"
#include "base/units.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/describe.h"
#include "cli/table.h"
#include "planner/text.h"
#include "base/input_error.h"
#include "sim/estimators.h"
#include "sim/memory_model.h"

namespace zplan::cli {

namespace {

struct MemoryOptions {
  SetupOptions setup;
  bool json = false;
  std::string compat;
};

// Every valid (stage, offload_optimizer, offload_param) combination, in the order printed.
std::vector<sim::DsConfig> all_combinations(const sim::DsConfig& base, int dp) {
  using sim::OffloadDevice;
  const OffloadDevice devices[] = {OffloadDevice::kNone, OffloadDevice::kCpu, OffloadDevice::kNvme};
  std::vector<sim::DsConfig> out;
  for (int stage = 0; stage <= 3; ++stage) {
    for (OffloadDevice opt : devices) {
      for (OffloadDevice par : devices) {
        if (stage == 0 && opt != OffloadDevice::kNone) continue;
        if (stage < 3 && (opt == OffloadDevice::kNvme || par != OffloadDevice::kNone)) continue;
        sim::DsConfig c = base;
        c.zero.stage = stage;
        c.zero.overlap_comm = stage == 3;  // DeepSpeed's default per stage
        c.zero.offload_optimizer.device = opt;
        c.zero.offload_param.device = par;
        if (opt == OffloadDevice::kNvme) c.zero.offload_optimizer.nvme_path = "/local_nvme";
        if (par == OffloadDevice::kNvme) c.zero.offload_param.nvme_path = "/local_nvme";
        if (stage <= 2 && opt != OffloadDevice::kNone) c.zero.contiguous_gradients = true;
        sim::validate_ds_config(c, dp, "combination");
        out.push_back(c);
      }
    }
  }
  return out;
}

int run_estimator(const MemoryOptions& o) {
  models::Model model = resolve_model(o.setup);
  hardware::Cluster cluster = resolve_cluster(o.setup);
  const int per_node = cluster.gpus_per_node();
  auto z2 = sim::estimate_zero2_all_cold(model.num_params(), per_node, cluster.nodes);
  auto z3 = sim::estimate_zero3_all_cold(model.num_params(), model.largest_module_params(),
                                         per_node, cluster.nodes);
  if (o.json) {
    nlohmann::json j;
    j["total_params"] = model.num_params();
    j["largest_layer_params"] = model.largest_module_params();
    auto rows = [](const std::vector<sim::EstimatorRow>& v) {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& r : v) {
        a.push_back(
            {{"options", r.options}, {"cpu_bytes", r.cpu_bytes}, {"gpu_bytes", r.gpu_bytes}});
      }
      return a;
    };
    j["zero2"] = rows(z2);
    j["zero3"] = rows(z3);
    std::cout << j.dump(2) << '\n';
    return kExitOk;
  }
  std::cout << "# DeepSpeed's estimators (model states only: no activations, buckets or runtime)\n"
            << strformat(
                   "# %s: total_params=%lld, largest_layer_params=%lld, "
                   "num_gpus_per_node=%d, num_nodes=%d\n",
                   model.name().c_str(), static_cast<long long>(model.num_params()),
                   static_cast<long long>(model.largest_module_params()), per_node, cluster.nodes);
  auto print = [](const char* title, const std::vector<sim::EstimatorRow>& v) {
    std::cout << '\n' << title << '\n';
    Table t({"per CPU", "per GPU", "options", "cpu bytes", "gpu bytes"},
            {true, true, false, true, true});
    for (const auto& r : v) {
      t.add_row({sim::deepspeed_gb(r.cpu_bytes), sim::deepspeed_gb(r.gpu_bytes), r.options,
                 std::to_string(r.cpu_bytes), std::to_string(r.gpu_bytes)});
    }
    t.print(std::cout, "  ");
  };
  print("estimate_zero2_model_states_mem_needs_all_cold:", z2);
  print("estimate_zero3_model_states_mem_needs_all_cold:", z3);
  return kExitOk;
}

int run_memory(const MemoryOptions& o) {
  if (!o.compat.empty()) {
    if (ascii_lower(o.compat) != "deepspeed-estimator") {
      throw InputError("--compat", "must be deepspeed-estimator, got '" + o.compat + "'");
    }
    return run_estimator(o);
  }
  Setup setup = resolve_setup(o.setup);
  print_notes(setup.notes);
  const bool single = !o.setup.ds_config.empty() || any_zero_flag(o.setup);
  if (single) {
    sim::MemoryReport r =
        sim::analyze_memory(setup.rank_model(), setup.cluster, setup.config, setup.workload);
    if (o.json) {
      nlohmann::json j = setup_to_json(setup);
      j["memory"] = memory_report_to_json(r);
      std::cout << j.dump(2) << '\n';
      return kExitOk;
    }
    std::cout << "zplan memory: " << describe_run(setup.model, setup.cluster) << '\n'
              << "  " << describe_config(setup.config, setup.workload) << '\n'
              << "  zero_optimization: " << describe_zero_knobs(setup.config) << "\n\n";
    print_memory_report(std::cout, r, setup.cluster, setup.config.precision);
    return kExitOk;
  }
  std::vector<sim::DsConfig> configs = all_combinations(setup.config, setup.cluster.gpus);
  if (o.json) {
    nlohmann::json j = setup_to_json(setup);
    j.erase("ds_config");
    nlohmann::json rows = nlohmann::json::array();
    for (const sim::DsConfig& c : configs) {
      sim::MemoryReport r =
          sim::analyze_memory(setup.rank_model(), setup.cluster, c, setup.workload);
      rows.push_back(
          {{"ds_config", sim::ds_config_to_json(c)}, {"memory", memory_report_to_json(r)}});
    }
    j["combinations"] = rows;
    std::cout << j.dump(2) << '\n';
    return kExitOk;
  }
  std::cout << "zplan memory: " << describe_run(setup.model, setup.cluster) << '\n'
            << "  every stage and offload combination; "
            << describe_training(setup.config, setup.workload) << "\n\n";
  Table t({"stage", "offload opt", "offload param", "GPU peak GiB", "at", "dominant on GPU",
           "host GiB/node", "NVMe GiB/node", "fits"},
          {true, false, false, true, false, false, true, true, false});
  for (const sim::DsConfig& c : configs) {
    sim::MemoryReport r =
        sim::analyze_memory(setup.rank_model(), setup.cluster, c, setup.workload);
    const auto& g = r[sim::Tier::kGpu];
    sim::Category dom = g.at_peak.dominant();
    const sim::MemoryFit fit = r.fit();
    std::string why = fit.fits()        ? "yes"
                      : !fit.gpu_fits() ? strformat("no: GPU short %.1f GiB", fit.over.gpu / kGiB)
                      : !fit.host_fits() ? "no: host"
                                         : "no: NVMe";
    double nvme = r[sim::Tier::kNvme].peak_bytes;
    t.add_row(
        {std::to_string(c.zero.stage), sim::offload_device_name(c.zero.offload_optimizer.device),
         c.zero.stage == 3 ? sim::offload_device_name(c.zero.offload_param.device) : "-",
         strformat("%.1f", g.peak_bytes / kGiB), sim::phase_name(g.peak_phase),
         strformat("%s %.0f%%", planner::category_words(static_cast<int>(dom), c.precision, c.optimizer.master_dtype).c_str(), 100.0 * g.at_peak[dom] / g.peak_bytes),
         strformat("%.1f", r.host_peak_bytes / kGiB),
         nvme > 0 ? strformat("%.1f", nvme / kGiB) : "-", why});
  }
  t.print(std::cout, "  ");
  std::cout << strformat(
      "\n  capacity: GPU %.1f GiB, host %.0f GiB per node, NVMe %.0f GiB per "
      "node; details: zplan memory ... --stage N [--offload-optimizer cpu]\n",
      setup.cluster.profile.gpu.memory_bytes / kGiB,
      setup.cluster.profile.node.host_memory_bytes / kGiB,
      setup.cluster.profile.node.nvme_capacity_bytes / kGiB);
  return kExitOk;
}

}  // namespace

void setup_memory_command(CLI::App& app, Action* action) {
  auto options = std::make_shared<MemoryOptions>();
  CLI::App* sub = app.add_subcommand(
      "memory", "memory per GPU, host and NVMe for one config or every stage/offload combination");
  add_setup_options(*sub, options->setup, /*zero_flags=*/true);
  sub->add_flag("--json", options->json, "print JSON instead of tables");
  sub->add_option("--compat", options->compat,
                  "deepspeed-estimator: print DeepSpeed's estimate_zero2/zero3 numbers instead");
  sub->callback([options, action] { *action = [options] { return run_memory(*options); }; });
}

}  // namespace zplan::cli
