// Periodic regions and the engine's jump over their repeats: the jump must change nothing --
// every task's start, end and critical-path link, the event count and every memory peak are
// compared bit for bit with a run that simulates every task -- and it must actually happen where
// the step is made of identical layers.
#include "sim/periodic.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "hardware/profile.h"
#include "models/catalog.h"
#include "sim/engine.h"
#include "sim/event_queue.h"
#include "sim/step_builder.h"
#include "tests/sim/sim_test_util.h"

namespace zplan::sim {
namespace {

void require_same(const StepGraph& g, const EngineResult& a, const EngineResult& b) {
  REQUIRE(a.end == b.end);
  REQUIRE(a.events == b.events);
  for (int t = 0; t < kNumTiers; ++t) {
    INFO("tier " << t);
    REQUIRE(a.peak[t] == b.peak[t]);
    REQUIRE(a.peak_at[t] == b.peak_at[t]);
    REQUIRE(a.at_peak[t].bytes == b.at_peak[t].bytes);
    REQUIRE(a.final_memory[t].bytes == b.final_memory[t].bytes);
  }
  for (size_t k = 0; k < g.tasks().size(); ++k) {
    INFO("task " << k);
    REQUIRE(a.timing[k].start == b.timing[k].start);
    REQUIRE(a.timing[k].end == b.timing[k].end);
    REQUIRE(a.timing[k].released_by == b.timing[k].released_by);
  }
}

// Runs g with and without the jump, checks they agree, returns the run with it.
EngineResult run_both(const StepGraph& g) {
  Simulator s;
  EngineResult with, without;
  EngineOptions o;
  s.run(g, o, &with);
  o.skip_periods = false;
  s.run(g, o, &without);
  require_same(g, with, without);
  return with;
}

struct LayerSpec {
  double compute_s = 1e-3;
  double gather_s = 0.6e-3;
  double copy_s = 0.3e-3;
  double grad_bytes = 1 << 20;  // kept per layer: memory grows every period
};

// A stage-3-like step: per layer, an all-gather on its own stream issued two layers ahead of
// compute, the layer's compute (which uses and frees the gathered parameters and keeps some
// gradient), and two copies on the same PCIe link that share its bandwidth.
StepGraph layered_graph(int layers, const LayerSpec& spec, int odd_layer = -1) {
  StepGraph g;
  std::vector<TaskId> computes;
  std::vector<TaskId> gathers;
  for (int l = 0; l < layers; ++l) {
    g.hint_repeat();
    Task ag;
    ag.kind = TaskKind::kAllGather;
    ag.resource = Resource::kGatherStream;
    ag.link = LinkSlot::kIntraNode;
    ag.latency_s = 20e-6;
    ag.work_s = l == odd_layer ? 2 * spec.gather_s : spec.gather_s;
    ag.wire_bytes = 1e6;
    TaskId a = g.add(ag);
    if (l >= 2) g.depend(a, computes[l - 2]);
    g.effect(a, false, Tier::kGpu, Category::kGatheredParams, 8 << 20);
    gathers.push_back(a);
    Task c;
    c.kind = TaskKind::kForward;
    c.resource = Resource::kCompute;
    c.work_s = spec.compute_s;
    TaskId ct = g.add(c);
    g.depend(ct, a);
    g.effect(ct, true, Tier::kGpu, Category::kGatheredParams, -(8 << 20));
    g.effect(ct, true, Tier::kGpu, Category::kGrads, spec.grad_bytes);
    computes.push_back(ct);
    Task d;
    d.kind = TaskKind::kD2H;
    d.resource = Resource::kD2H;
    d.link = LinkSlot::kPcieD2H;
    d.latency_s = 5e-6;
    d.work_s = spec.copy_s;
    TaskId dt = g.add(d);
    g.depend(dt, ct);
    g.effect(dt, true, Tier::kPinnedHost, Category::kGrads, 1 << 16);
    Task w = d;
    w.kind = TaskKind::kNvmeWrite;
    w.resource = Resource::kNvmeWrite;
    w.link = LinkSlot::kPcieD2H;
    TaskId wt = g.add(w);
    g.depend(wt, ct);
  }
  g.comm_compute_slowdown = 0.1;
  g.finalize();
  return g;
}

TEST_CASE("a graph of identical layers is one periodic region, and the jump is exact",
          "[engine][periodic]") {
  StepGraph g = layered_graph(40, LayerSpec{});
  REQUIRE(g.periodic_regions().size() == 1);
  const PeriodicRegion& r = g.periodic_regions()[0];
  CHECK(r.period == 4);
  CHECK(r.end - r.begin >= 30 * 4);
  CHECK(r.exact_memory);
  CHECK(r.per_period[static_cast<int>(Resource::kCompute)] == 1);
  EngineResult res = run_both(g);
  // Most layers are copied, not simulated; the memory grows by each layer's gradients, so the
  // peak is at the end and comes from the extrapolation.
  CHECK(res.skipped_tasks > g.tasks().size() / 2);
  CHECK(res.peak[static_cast<int>(Tier::kGpu)] > 39.0 * (1 << 20));
}

TEST_CASE("contention settles into a period whatever the ratio of the layer's parts",
          "[engine][periodic]") {
  // Compute-bound and gather-bound layers and ones in between, with copies sharing the PCIe link
  // that keep up with the layer.
  for (double gather : {0.2e-3, 0.9e-3, 1.0e-3, 1.7e-3, 3.1e-3}) {
    for (double copy : {0.1e-3, 0.3e-3, 0.45e-3}) {
      LayerSpec spec;
      spec.gather_s = gather;
      spec.copy_s = copy;
      INFO("gather " << gather << " copy " << copy);
      StepGraph g = layered_graph(30, spec);
      EngineResult res = run_both(g);
      CHECK(res.skipped_tasks > 0);
    }
  }
}

TEST_CASE("copies that fall further behind every layer never settle, results stay exact",
          "[engine][periodic]") {
  // Two 2.3 ms copies per 1 ms layer: the copy engine's backlog grows each layer, so no state
  // repeats and nothing may be skipped.
  LayerSpec spec;
  spec.copy_s = 2.3e-3;
  StepGraph g = layered_graph(30, spec);
  CHECK(run_both(g).skipped_tasks == 0);
}

TEST_CASE("a layer that differs splits the region, results stay exact", "[engine][periodic]") {
  StepGraph g = layered_graph(40, LayerSpec{}, /*odd_layer=*/20);
  REQUIRE(g.periodic_regions().size() >= 1);
  for (const PeriodicRegion& r : g.periodic_regions()) {
    // No region may claim the odd layer's gather (task 80) is a copy of another.
    CHECK((r.end <= 80 + r.period || r.begin > 80));
    for (TaskId i = r.begin; i + r.period < r.end; ++i) CHECK(is_shifted_copy(g, i, i + r.period));
  }
  run_both(g);
}

TEST_CASE("memory that grows by inexact amounts is not extrapolated", "[engine][periodic]") {
  // 0.1 byte per layer is no multiple of 2^-10: sums of it round, so no jump may assume that n
  // layers add exactly n times as much. The run must still agree with the full simulation.
  LayerSpec spec;
  spec.grad_bytes = 0.1;
  StepGraph g = layered_graph(40, spec);
  REQUIRE(g.periodic_regions().size() == 1);
  CHECK_FALSE(g.periodic_regions()[0].exact_memory);
  EngineResult res = run_both(g);
  CHECK(res.skipped_tasks == 0);
  // Without growth, the same amounts are fine: the state repeats exactly.
  spec.grad_bytes = 0;
  StepGraph flat = layered_graph(40, spec);
  CHECK(run_both(flat).skipped_tasks > 0);
}

TEST_CASE("wrong hints find nothing wrong", "[engine][periodic]") {
  // Hints every task, on a graph whose tasks all differ: no region survives the check.
  StepGraph g;
  for (int i = 0; i < 100; ++i) {
    g.hint_repeat();
    Task t;
    t.resource = Resource::kCompute;
    t.work_s = 1e-3 * (1 + i);
    g.add(t);
  }
  g.finalize();
  CHECK(g.periodic_regions().empty());
  run_both(g);
}

TEST_CASE("exact memory values: multiples of 2^-10 below 2^42", "[periodic]") {
  CHECK(exact_memory_value(0));
  CHECK(exact_memory_value(-3.0 * (1 << 30)));
  CHECK(exact_memory_value(0.5));
  CHECK(exact_memory_value(std::ldexp(1.0, -10)));
  CHECK_FALSE(exact_memory_value(std::ldexp(1.0, -11)));
  CHECK_FALSE(exact_memory_value(0.1));
  CHECK_FALSE(exact_memory_value(std::ldexp(1.0, 42)));
  CHECK_FALSE(exact_memory_value(std::nan("")));
}

TEST_CASE("the event queue lists and shifts its pending events in order", "[engine]") {
  EventQueue q;
  q.reset(20, 0);
  q.schedule(3, SimTime(SimDuration(50)));
  q.schedule(1, SimTime(SimDuration(20)));
  q.schedule(4, SimTime(SimDuration(20)));  // ties with 1, scheduled later: pops after it
  q.schedule(2, SimTime(SimDuration(70)));
  std::vector<Event> pending;
  q.pending(&pending);
  REQUIRE(pending.size() == 4);
  CHECK(pending[0].target == 1);
  CHECK(pending[1].target == 4);
  CHECK(pending[2].target == 3);
  CHECK(pending[3].target == 2);
  q.shift(2, SimDuration(1000));  // targets 3, 6, 5, 4; overlapping old ones
  const uint32_t expect[] = {3, 6, 5, 4};
  const int64_t at[] = {1020, 1020, 1050, 1070};
  for (int i = 0; i < 4; ++i) {
    Event e = q.pop();
    CHECK(e.target == expect[i]);
    CHECK(e.at.time_since_epoch().count() == at[i]);
  }
  CHECK(q.empty());
}

// Builder graphs: every micro-step and the optimizer step of configs across stages, offloads and
// models, with and without the jump.
TEST_CASE("step graphs simulate the same with and without the jump", "[engine][periodic]") {
  struct Case {
    const char* model;
    const char* hw;
    int gpus;
    const char* json;
  };
  const Case cases[] = {
      {"20b", "a100", 8,
       R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2,
           "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}})"},
      {"20b", "a100", 8,
       R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
           "activation_checkpointing": {"partition_activations": true},
           "zero_optimization": {"stage": 3, "reduce_bucket_size": 37748736,
             "offload_optimizer": {"device": "nvme", "nvme_path": "/n"},
             "offload_param": {"device": "nvme", "nvme_path": "/n"}}})"},
      {"20b", "a100", 8,
       R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
           "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 2e9,
             "stage3_max_live_parameters": 3e9, "overlap_comm": false}})"},
      {"llama3-8b", "h100", 8,
       R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true},
           "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}})"},
      {"llama3-8b", "h100", 8,
       R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true},
           "zero_optimization": {"stage": 1, "reduce_bucket_size": 2e7}})"},
      {"13b", "a100-40g", 8,
       R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": true},
           "zero_optimization": {"stage": 0}})"},
      {"175b", "a100", 64,
       R"({"train_batch_size": 256, "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
           "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}})"},
  };
  size_t tasks = 0, skipped = 0;
  for (const Case& c : cases) {
    INFO(c.model << " on " << c.gpus << " " << c.hw << ": " << c.json);
    const models::Model model = models::load_model(c.model);
    const hardware::Cluster cluster =
        hardware::make_cluster(hardware::load_profile(c.hw), c.gpus, std::max(1, c.gpus / 8));
    Workload w;
    w.seq_len = model.shape().default_seq_len;
    const DsConfig config = testing::config(c.json, c.gpus, model.shape().hidden);
    StepBuilder builder(model, cluster, config, w);
    StepGraph g;
    for (auto [micro_step, repeats] : builder.distinct_micro_steps()) {
      INFO("micro-step " << micro_step);
      builder.build(micro_step, &g);
      EngineResult r = run_both(g);
      tasks += g.tasks().size();
      skipped += r.skipped_tasks;
    }
    builder.build_optimizer_step(builder.persistent(), &g);
    run_both(g);
  }
  // Most of these steps are their layers; most of the layers are jumped over.
  CHECK(skipped > tasks / 2);
}

}  // namespace
}  // namespace zplan::sim
