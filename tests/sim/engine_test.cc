// The discrete-event engine on hand-built graphs whose schedules can be worked out on paper.
#include <catch2/catch.hpp>

#include "sim/engine.h"

namespace zplan::sim {
namespace {

Task compute(double seconds) {
  Task t;
  t.resource = Resource::kCompute;
  t.work_s = seconds;
  return t;
}

Task transfer(Resource r, LinkSlot link, double latency, double work) {
  Task t;
  t.kind = TaskKind::kAllGather;
  t.resource = r;
  t.link = link;
  t.latency_s = latency;
  t.work_s = work;
  return t;
}

EngineResult run(StepGraph& g, uint64_t seed = 0) {
  g.finalize();
  Simulator s;
  EngineResult r;
  EngineOptions o;
  o.shuffle_seed = seed;
  s.run(g, o, &r);
  return r;
}

double secs(SimTime t) { return to_seconds(t); }

TEST_CASE("one task lasts latency plus work", "[engine]") {
  // 3 us latency + 2 ms at the full link rate, alone on the link: 2.003 ms.
  StepGraph g;
  g.add(transfer(Resource::kGatherStream, LinkSlot::kIntraNode, 3e-6, 2e-3));
  EngineResult r = run(g);
  CHECK(secs(r.end) == Approx(2.003e-3).epsilon(1e-9));
  CHECK(r.timing[0].released_by == kNoTask);
}

TEST_CASE("a graph longer than the clock is made for is refused, not overflowed", "[engine]") {
  // Two tasks of 0.6e9 s each: 38 years in all, past kMaxGraphSeconds (31.7 years).
  StepGraph g;
  g.add(compute(0.6e9));
  g.add(transfer(Resource::kGatherStream, LinkSlot::kIntraNode, 0, 0.6e9));
  CHECK_THROWS_WITH(g.finalize(), Catch::StartsWith("simulation: the tasks of one step add up "
                                                    "to 38 years, past the 31 years"));
  StepGraph ok;
  ok.add(compute(0.6e9));
  EngineResult r = run(ok);
  CHECK(secs(r.end) == 0.6e9);
}

TEST_CASE("a resource runs its tasks one at a time in program order", "[engine]") {
  // Two compute tasks of 1 s and 2 s: the second starts when the first ends.
  StepGraph g;
  g.add(compute(1));
  g.add(compute(2));
  EngineResult r = run(g);
  CHECK(secs(r.timing[1].start) == Approx(1));
  CHECK(secs(r.end) == Approx(3));
  CHECK(r.timing[1].released_by == 0);
}

TEST_CASE("dependencies across resources, overlap where allowed", "[engine]") {
  // gather (1 s) -> compute A (2 s); compute B (0.5 s) is before A on the stream and
  // independent, so it runs at time 0; A starts at max(1, 0.5) = 1 and ends at 3.
  StepGraph g;
  TaskId gather = g.add(transfer(Resource::kGatherStream, LinkSlot::kNone, 0, 1));
  TaskId b = g.add(compute(0.5));
  TaskId a = g.add(compute(2));
  g.depend(a, gather);
  EngineResult r = run(g);
  CHECK(secs(r.timing[b].start) == 0);
  CHECK(secs(r.timing[a].start) == Approx(1));
  CHECK(secs(r.end) == Approx(3));
  CHECK(r.timing[a].released_by == gather);
}

TEST_CASE("concurrent transfers share a link's bandwidth equally", "[engine]") {
  // A: 10 ms of work alone from t = 0. B: 10 ms of work, starts at t = 5 ms (after a 5 ms
  // compute). From 0 to 5 A runs alone (5 ms of work left); then both at half rate: A needs
  // 10 ms more and ends at 15; by then B has done 5 ms of work and finishes the other 5 alone at
  // 20 ms.
  StepGraph g;
  TaskId a = g.add(transfer(Resource::kGatherStream, LinkSlot::kIntraNode, 0, 10e-3));
  TaskId c = g.add(compute(5e-3));
  TaskId b = g.add(transfer(Resource::kReduceStream, LinkSlot::kIntraNode, 0, 10e-3));
  g.depend(b, c);
  EngineResult r = run(g);
  CHECK(secs(r.timing[a].end) == Approx(15e-3).epsilon(1e-6));
  CHECK(secs(r.timing[b].end) == Approx(20e-3).epsilon(1e-6));
}

TEST_CASE("transfers on different links do not share", "[engine]") {
  // H2D and D2H are separate directions of PCIe: 4 ms each, both done at 4 ms.
  StepGraph g;
  g.add(transfer(Resource::kH2D, LinkSlot::kPcieH2D, 0, 4e-3));
  g.add(transfer(Resource::kD2H, LinkSlot::kPcieD2H, 0, 4e-3));
  EngineResult r = run(g);
  CHECK(secs(r.end) == Approx(4e-3));
}

TEST_CASE("memory effects: baseline, peak and the breakdown at the peak", "[engine]") {
  // Baseline 10 GB params. Task 0 (1 s) allocates 4 activations at start, frees them at end;
  // task 1 (1 s, after it) allocates 6 buckets and frees 6 at end. Peak = 16 during task 1.
  StepGraph g;
  g.baseline[0][Category::kParams16] = 10;
  TaskId t0 = g.add(compute(1));
  g.effect(t0, false, Tier::kGpu, Category::kActivations, 4);
  g.effect(t0, true, Tier::kGpu, Category::kActivations, -4);
  TaskId t1 = g.add(compute(1));
  g.effect(t1, false, Tier::kGpu, Category::kBuckets, 6);
  g.effect(t1, true, Tier::kGpu, Category::kBuckets, -6);
  EngineResult r = run(g);
  CHECK(r.peak[0] == Approx(16));
  CHECK(r.at_peak[0][Category::kBuckets] == Approx(6));
  CHECK(r.at_peak[0][Category::kActivations] == Approx(0));
  CHECK(secs(r.peak_at[0]) == Approx(1));
  CHECK(r.final_memory[0].total() == Approx(10));
}

TEST_CASE("a free and an allocation at the same instant do not stack", "[engine]") {
  // Task 0 frees 5 at t = 1 and task 1 (on another resource, released by a 1 s compute) allocates
  // 5 at t = 1; measured after the instant, memory never exceeds baseline + 5.
  StepGraph g;
  TaskId a = g.add(compute(1));
  g.effect(a, false, Tier::kGpu, Category::kActivations, 5);
  g.effect(a, true, Tier::kGpu, Category::kActivations, -5);
  TaskId b = g.add(transfer(Resource::kGatherStream, LinkSlot::kNone, 0, 1));
  g.depend(b, a);
  g.effect(b, false, Tier::kGpu, Category::kGatheredParams, 5);
  g.effect(b, true, Tier::kGpu, Category::kGatheredParams, -5);
  for (uint64_t seed : {0, 1, 2, 3}) {
    StepGraph copy = g;
    EngineResult r = run(copy, seed);
    CHECK(r.peak[0] == Approx(5));
  }
}

TEST_CASE("results do not depend on the order of equal-time events", "[engine]") {
  // A small fan-out/fan-in graph with many simultaneous ends on a shared link.
  StepGraph g;
  TaskId root = g.add(compute(1));
  std::vector<TaskId> mids;
  for (int i = 0; i < 3; ++i) {
    Resource r = i == 0 ? Resource::kGatherStream : i == 1 ? Resource::kReduceStream : Resource::kH2D;
    TaskId m = g.add(transfer(r, LinkSlot::kIntraNode, 1e-3, 2e-3));
    g.depend(m, root);
    g.effect(m, false, Tier::kGpu, Category::kBuckets, 1 + i);
    g.effect(m, true, Tier::kGpu, Category::kBuckets, -(1 + i));
    mids.push_back(m);
  }
  TaskId last = g.add(compute(1));
  for (TaskId m : mids) g.depend(last, m);
  StepGraph reference = g;
  EngineResult base = run(reference, 0);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    StepGraph copy = g;
    EngineResult r = run(copy, seed);
    CHECK(r.end.time_since_epoch().count() == base.end.time_since_epoch().count());
    CHECK(r.peak[0] == base.peak[0]);
  }
  // Three 2 ms transfers share the link: 6 ms after their common 1 ms latency.
  CHECK(secs(base.end) == Approx(1 + 1e-3 + 6e-3 + 1).epsilon(1e-9));
}

}  // namespace
}  // namespace zplan::sim

namespace zplan::sim {
namespace {

TEST_CASE("compute slows down while a collective runs on another stream", "[engine]") {
  // Compute: 10 ms of work from t = 0. A 4 ms all-gather on the gather stream starts at t = 2 ms
  // (after a 2 ms copy). With slowdown s, compute does 2 ms of work by t = 2, 4 * (1 - s) during
  // the gather, and the rest at full speed after t = 6:
  //   s = 0.5: 2 + 2 + 6 -> ends at 12 ms;   s = 1: 2 + 0 + 8 -> ends at 14 ms (no overlap).
  for (auto [s, end_ms] : {std::pair{0.5, 12.0}, std::pair{1.0, 14.0}, std::pair{0.0, 10.0}}) {
    StepGraph g;
    g.comm_compute_slowdown = s;
    g.add(compute(10e-3));
    Task copy = transfer(Resource::kH2D, LinkSlot::kNone, 0, 2e-3);
    copy.kind = TaskKind::kH2D;
    TaskId c = g.add(copy);
    TaskId ag = g.add(transfer(Resource::kGatherStream, LinkSlot::kIntraNode, 0, 4e-3));
    g.depend(ag, c);
    EngineResult r = run(g);
    INFO("slowdown " << s);
    CHECK(secs(r.timing[0].end) == Approx(end_ms * 1e-3).margin(1e-9));
  }
}

}  // namespace
}  // namespace zplan::sim
