// sim_bench: how fast zplan simulates one optimizer step.
//
// The acceptance case is one step of 175b (GPT-3 shape), ZeRO stage 3, gradient accumulation 8,
// on 64 A100s (8 nodes): the simulator's target is <= 1 ms median on a 2-core machine. Other
// cases show the range. Each case is simulated `--batch` times per sample (amortizing the clock)
// and `--samples` samples are taken; the table reports the median and the spread of the
// per-step time, the tasks and events of one step, and events per second.
//
//   sim_bench [--samples 15] [--batch 50] [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hardware/profile.h"
#include "models/catalog.h"
#include "sim/simulate.h"

namespace {

using namespace zplan;

struct Case {
  const char* name;
  const char* model;
  const char* hw;
  int gpus;
  int stage;
  int gas;
  int micro_batch;
  const char* extra;  // more zero_optimization keys
};

const Case kCases[] = {
    {"175b z3 gas8 64xA100 (target <= 1 ms)", "175b", "a100", 64, 3, 8, 1, ""},
    {"20b z3 gas4 8xA100", "20b", "a100", 8, 3, 4, 1, ""},
    {"20b z3 offload cpu gas4 8xA100", "20b", "a100", 8, 3, 4, 1,
     R"(, "offload_optimizer": {"device": "cpu"})"},
    {"20b z2 gas4 8xA100", "20b", "a100", 8, 2, 4, 1, ""},
    {"llama3-8b z1 gas8 8xH100", "llama3-8b", "h100", 8, 1, 8, 2, ""},
    {"llama3.1-405b z3 gas16 512xH100", "llama3.1-405b", "h100", 512, 3, 16, 1, ""},
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  int samples = 15, batch = 50;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--samples") && i + 1 < argc) {
      samples = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--batch") && i + 1 < argc) {
      batch = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--json")) {
      json = true;
    } else {
      std::fprintf(stderr, "usage: sim_bench [--samples N] [--batch N] [--json]\n");
      return 2;
    }
  }
  nlohmann::json out = nlohmann::json::array();
  if (!json) {
    std::printf("# one simulated optimizer step per iteration; %d samples of %d steps each\n",
                samples, batch);
    std::printf("%-40s %10s %10s %10s %8s %8s %12s\n", "case", "median us", "min us", "max us",
                "tasks", "events", "Mevents/s");
  }
  for (const Case& c : kCases) {
    models::Model model = models::load_model(c.model);
    hardware::Cluster cluster =
        hardware::make_cluster(hardware::load_profile(c.hw), c.gpus, std::max(1, c.gpus / 8));
    sim::ParseContext ctx;
    ctx.dp_world_size = cluster.gpus;
    ctx.hidden_size = model.shape().hidden;
    std::string text = std::string(R"({"train_micro_batch_size_per_gpu": )") +
                       std::to_string(c.micro_batch) + R"(, "gradient_accumulation_steps": )" +
                       std::to_string(c.gas) + R"(, "bf16": {"enabled": true},
                       "zero_optimization": {"stage": )" +
                       std::to_string(c.stage) + c.extra + "}}";
    sim::DsConfig config = sim::parse_ds_config(nlohmann::json::parse(text), c.name, ctx);
    sim::Workload workload{2048, sim::Attention::kSdpa};
    sim::SimWorkspace ws;
    ws.reuse_outcomes = false;  // the same config each time: every run goes through the engine
    sim::SimulateOptions so;
    so.workspace = &ws;
    sim::StepResult r = sim::simulate_step(model, cluster, config, workload, so);  // warm-up
    std::vector<double> per_step_us;
    for (int s = 0; s < samples; ++s) {
      auto t0 = std::chrono::steady_clock::now();
      for (int b = 0; b < batch; ++b) r = sim::simulate_step(model, cluster, config, workload, so);
      auto t1 = std::chrono::steady_clock::now();
      per_step_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / batch);
    }
    const double med = median(per_step_us);
    const double lo = *std::min_element(per_step_us.begin(), per_step_us.end());
    const double hi = *std::max_element(per_step_us.begin(), per_step_us.end());
    const double mevents = static_cast<double>(r.events) / med;
    if (json) {
      out.push_back({{"case", c.name},
                     {"median_us", med},
                     {"min_us", lo},
                     {"max_us", hi},
                     {"tasks", r.tasks},
                     {"events", r.events},
                     {"events_per_s", mevents * 1e6},
                     {"simulated_step_time_s", r.step_time_s}});
    } else {
      std::printf("%-40s %10.1f %10.1f %10.1f %8zu %8llu %12.1f\n", c.name, med, lo, hi, r.tasks,
                  static_cast<unsigned long long>(r.events), mevents);
    }
  }
  if (json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
