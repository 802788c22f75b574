#include "executor/validate.h"

#include <algorithm>
#include <cmath>

#include "sim/step_builder.h"

namespace zplan::executor {

namespace {

const char* kTierLabel[sim::kNumTiers] = {"GPU (device arena)", "pinned host", "pageable host",
                                          "NVMe"};

}  // namespace

PhaseTimes phase_times(const sim::StepGraph& graph, const sim::EngineResult& result) {
  PhaseTimes p;
  p.total_s = sim::to_seconds(result.end);
  const auto& tasks = graph.tasks();
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].kind == sim::TaskKind::kForward) {
      p.forward_s = std::max(p.forward_s, sim::to_seconds(result.timing[i].end));
    }
  }
  p.backward_s = p.total_s - p.forward_s;
  return p;
}

double ValidationReport::max_checked_error() const {
  double worst = 0;
  for (const auto* rows : {&time, &memory}) {
    for (const ValidationRow& r : *rows) {
      if (r.checked) worst = std::max(worst, std::fabs(r.error()));
    }
  }
  return worst;
}

nlohmann::json ValidationReport::to_json() const {
  auto rows_json = [](const std::vector<ValidationRow>& rows) {
    nlohmann::json a = nlohmann::json::array();
    for (const ValidationRow& r : rows) {
      a.push_back({{"name", r.name},
                   {"unit", r.unit},
                   {"predicted", r.predicted},
                   {"measured", r.measured},
                   {"error_pct", 100 * r.error()},
                   {"checked", r.checked}});
    }
    return a;
  };
  nlohmann::json j;
  j["time"] = rows_json(time);
  j["memory"] = rows_json(memory);
  j["task_busy"] = rows_json(tasks);
  j["max_checked_error_pct"] = 100 * max_checked_error();
  nlohmann::json breakdown = nlohmann::json::object();
  for (int t = 0; t < sim::kNumTiers; ++t) {
    nlohmann::json tier = nlohmann::json::object();
    for (int c = 0; c < sim::kNumCategories; ++c) {
      const double pred = predicted_at_peak[t].bytes[c], meas = measured_at_peak[t].bytes[c];
      if (pred == 0 && meas == 0) continue;
      tier[sim::category_name(static_cast<sim::Category>(c))] = {{"predicted", pred},
                                                                 {"measured", meas}};
    }
    if (!tier.empty()) breakdown[sim::tier_name(static_cast<sim::Tier>(t))] = tier;
  }
  j["at_peak_bytes"] = breakdown;
  j["measured_steps_s"] = measured.step_s;
  j["loss"] = measured.loss;
  j["compute_wait_s"] = measured.compute_wait_s;
  j["device"] = measured.device;
  j["comm"] = measured.comm;
  j["pinned_memory"] = measured.pinned;
  if (!measured.swap.empty()) j["nvme_swap"] = measured.swap;
  return j;
}

ValidationReport validate(const models::Model& model, const hardware::Cluster& cluster,
                          const sim::DsConfig& config, const sim::Workload& workload,
                          ExecutorDevice& device, const ValidateOptions& options) {
  ValidationReport rep;
  // Predicted: every graph of the step, observed for its phases.
  std::vector<PhaseTimes> predicted_phases;
  std::array<double, sim::kNumTaskKinds> predicted_busy{}, measured_busy{};
  auto add_busy = [](const sim::StepGraph& g, const sim::EngineResult& er,
                     std::array<double, sim::kNumTaskKinds>* busy) {
    for (size_t i = 0; i < g.tasks().size(); ++i) {
      (*busy)[static_cast<size_t>(g.tasks()[i].kind)] +=
          sim::to_seconds(er.timing[i].end - er.timing[i].start);
    }
  };
  sim::SimulateOptions so;
  so.every_micro_step = true;
  so.observer = [&](const sim::StepGraph& g, const sim::EngineResult& er, double) {
    predicted_phases.push_back(phase_times(g, er));
    add_busy(g, er, &predicted_busy);
  };
  rep.predicted = sim::simulate_step(model, cluster, config, workload, so);
  rep.measured = execute_steps(model, cluster, config, workload, device, options.execute);

  // Measured phases from the same graphs.
  const int gas = static_cast<int>(config.gradient_accumulation_steps);
  sim::StepBuilder builder(model, cluster, config, workload);
  std::vector<PhaseTimes> measured_phases;
  sim::StepGraph graph;
  double offset = 0;
  for (int i = 0; i <= gas && static_cast<size_t>(i) < rep.measured.micro_steps.size(); ++i) {
    if (i < gas) {
      builder.build(i, &graph);
    } else {
      builder.build_optimizer_step(builder.persistent(), &graph);
    }
    const sim::EngineResult& er = rep.measured.micro_steps[static_cast<size_t>(i)];
    measured_phases.push_back(phase_times(graph, er));
    add_busy(graph, er, &measured_busy);
    if (options.measured_trace != nullptr) {
      options.measured_trace->add(graph, er, offset, cluster.gpus_per_node());
    }
    offset += sim::to_seconds(er.end);
  }
  if (options.measured_trace != nullptr) options.measured_trace->finish();

  auto add_time = [&](const std::string& name, double pred, double meas, bool checked) {
    rep.time.push_back(ValidationRow{name, "s", pred, meas, checked});
  };
  add_time("step time", rep.predicted.step_time_s, rep.measured.step_time_s, true);
  auto sum = [&](const std::vector<PhaseTimes>& v, double PhaseTimes::*field, int from, int to) {
    double s = 0;
    for (int i = from; i < to && static_cast<size_t>(i) < v.size(); ++i) s += v[static_cast<size_t>(i)].*field;
    return s;
  };
  add_time("forward (all micro-steps)", sum(predicted_phases, &PhaseTimes::forward_s, 0, gas),
           sum(measured_phases, &PhaseTimes::forward_s, 0, gas), false);
  add_time("backward + reduction (all micro-steps)",
           sum(predicted_phases, &PhaseTimes::backward_s, 0, gas),
           sum(measured_phases, &PhaseTimes::backward_s, 0, gas), false);
  add_time("optimizer step", sum(predicted_phases, &PhaseTimes::total_s, gas, gas + 1),
           sum(measured_phases, &PhaseTimes::total_s, gas, gas + 1), false);
  if (gas > 1) {
    add_time("micro-step 0", sum(predicted_phases, &PhaseTimes::total_s, 0, 1),
             sum(measured_phases, &PhaseTimes::total_s, 0, 1), false);
    if (gas > 2) {
      const double n = gas - 2;
      add_time("micro-steps 1-" + std::to_string(gas - 2) + " (mean)",
               sum(predicted_phases, &PhaseTimes::total_s, 1, gas - 1) / n,
               sum(measured_phases, &PhaseTimes::total_s, 1, gas - 1) / n, false);
    }
    add_time("micro-step " + std::to_string(gas - 1) + " (boundary)",
             sum(predicted_phases, &PhaseTimes::total_s, gas - 1, gas),
             sum(measured_phases, &PhaseTimes::total_s, gas - 1, gas), false);
  }

  for (int k = 0; k < sim::kNumTaskKinds; ++k) {
    if (predicted_busy[static_cast<size_t>(k)] <= 0 && measured_busy[static_cast<size_t>(k)] <= 0) {
      continue;
    }
    rep.tasks.push_back(ValidationRow{sim::task_kind_name(static_cast<sim::TaskKind>(k)), "s",
                                      predicted_busy[static_cast<size_t>(k)],
                                      measured_busy[static_cast<size_t>(k)], false});
  }
  const double per_node = cluster.gpus_per_node();
  for (int t = 0; t < sim::kNumTiers; ++t) {
    const double scale = t == 0 ? 1.0 : per_node;
    const double runtime = rep.predicted.at_peak[t][sim::Category::kRuntime];
    rep.predicted_at_peak[t] = rep.predicted.at_peak[t].scaled(1 / scale);
    rep.predicted_at_peak[t][sim::Category::kRuntime] = 0;
    rep.measured_at_peak[t] = rep.measured.at_peak[static_cast<size_t>(t)];
    const double pred = (rep.predicted.peak_bytes[t] - runtime) / scale;
    const double meas = rep.measured.peak_bytes[static_cast<size_t>(t)];
    if (pred <= 0 && meas <= 0) continue;
    rep.memory.push_back(
        ValidationRow{std::string("peak ") + kTierLabel[t], "bytes", pred, meas, true});
  }
  return rep;
}

}  // namespace zplan::executor
