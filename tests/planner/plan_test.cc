// The planner's answers: the recommendation always fits, the written ds_config round-trips with
// consistent batch keys, results do not depend on the thread count, and the sanity cases users
// know by heart (20B on 40 GB A100s, Llama-3-8B on H100s, 175B on one DGX).
#include "planner/plan.h"

#include <cstring>
#include <set>

#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "planner/report_html.h"
#include "planner/timeline.h"
#include "tests/planner/planner_test_util.h"

namespace zplan::planner {
namespace {

using testing::knobs;
using testing::problem;

constexpr int kGpu = static_cast<int>(sim::Tier::kGpu);

PlanResult run_plan(const Problem& p, const KnobRequest& k = {}, int threads = 2) {
  PlanOptions o;
  o.eval.threads = threads;
  return plan(p, k, {}, o);
}

// Everything the ranking calls "fits" does, with headroom, in both memory views.
void check_fits(const Problem& p, const Evaluation& e) {
  const auto& prof = p.cluster.profile;
  const double keep = 1 - p.headroom;
  CHECK(e.simulated);
  CHECK(e.peak_bytes[kGpu] <= prof.gpu.memory_bytes * keep);
  CHECK(e.host_peak_bytes <= prof.node.host_memory_bytes * keep);
  CHECK(e.peak_bytes[static_cast<int>(sim::Tier::kNvme)] <= prof.node.nvme_capacity_bytes * keep);
  // The analytic bound of the same config fits too.
  CHECK(e.fit.over.gpu == 0);
}

TEST_CASE("the recommended config always fits, and ranks above everything that does not",
          "[planner]") {
  struct Case {
    const char* model;
    const char* hw;
    int gpus;
  };
  // Small and large models, one GPU to two nodes, tight and roomy GPUs.
  const Case cases[] = {{"1.3b", "v100", 1}, {"6.7b", "a100-40g", 8}, {"llama2-7b", "h100", 4},
                        {"13b", "a100", 16}, {"20b", "a100-40g", 8},  {"30b", "h100", 8}};
  for (const Case& c : cases) {
    INFO(c.model << " on " << c.gpus << " x " << c.hw);
    Problem p = problem(c.model, c.hw, c.gpus);
    // Micro-batches 1-4 keep the property check fast; the ranking logic is the same.
    PlanResult r = run_plan(p, knobs({{Knob::kMicroBatch, "1,2,4"}}));
    const SearchResult& s = r.search;
    CHECK(s.stats.generated == s.candidates.size());
    CHECK(s.stats.pruned + s.stats.simulated == s.stats.generated);
    bool seen_miss = false;
    for (size_t i : s.order) {
      if (!s.evals[i].fits()) seen_miss = true;
      CHECK_FALSE((seen_miss && s.evals[i].fits()));
      if (s.evals[i].fits()) check_fits(p, s.evals[i]);
    }
    if (r.recommended) {
      check_fits(p, s.evals[*r.recommended]);
      CHECK(!r.why.empty());
      CHECK(r.alternatives.size() <= 5);
    } else {
      CHECK(s.stats.fitting == 0);
      CHECK(!r.what_would_fit.empty());
    }
  }
}

TEST_CASE("the written ds_config round-trips with consistent batch keys", "[planner]") {
  for (const char* hw : {"a100", "a100-40g"}) {  // no offload, and CPU offload
    Problem p = problem("20b", hw, 8);
    PlanResult r = run_plan(p, knobs({{Knob::kMicroBatch, "1,2"}}));
    REQUIRE(r.recommended);
    const Candidate& c = r.search.candidates[*r.recommended];
    sim::DsConfig d = to_ds_config(c, base_config(p, r.search.space.batch), p);
    REQUIRE_NOTHROW(sim::validate_ds_config(d, 8, "recommended"));
    nlohmann::json j = sim::ds_config_to_json(d);
    sim::ParseContext context;
    context.dp_world_size = 8;
    sim::DsConfig back = sim::parse_ds_config(j, "ds_config.json", context);
    CHECK(j["train_batch_size"].get<int64_t>() ==
          j["train_micro_batch_size_per_gpu"].get<int64_t>() *
              j["gradient_accumulation_steps"].get<int64_t>() * 8);
    CHECK(back.train_batch_size == r.search.space.batch.global_batch);
    CHECK(back.micro_batch == c[Knob::kMicroBatch]);
    CHECK(back.zero.stage == c.stage());
    CHECK(back.zero.offload_optimizer.device == c.offload_optimizer());
    CHECK(back.activation_checkpointing.enabled == (c[Knob::kCheckpointing] != 0));
    CHECK(sim::ds_config_to_json(back) == j);
  }
}

TEST_CASE("search results are identical with 1 and 2 threads", "[planner]") {
  Problem p = problem("6.7b", "a100-40g", 8);
  KnobRequest k = knobs({{Knob::kMicroBatch, "1,2,4"}, {Knob::kReduceBucket, "5e7,5e8"}});
  EvalOptions one, two;
  one.threads = 1;
  two.threads = 2;
  SearchResult a = run_search(p, k, {}, one);
  SearchResult b = run_search(p, k, {}, two);
  REQUIRE(a.evals.size() == b.evals.size());
  for (size_t i = 0; i < a.evals.size(); ++i) {
    CHECK(a.evals[i].tokens_per_s == b.evals[i].tokens_per_s);
    CHECK(a.evals[i].peak_bytes == b.evals[i].peak_bytes);
    CHECK(a.evals[i].verdict == b.evals[i].verdict);
  }
  CHECK(a.order == b.order);
  CHECK(a.pareto == b.pareto);
}

TEST_CASE("search results are identical with and without reusing identical graphs", "[planner]") {
  // Prefetch and max-live values below every module's size leave stage 3's graphs unchanged:
  // those configs are answered whole from an equivalent one (no graph built), and sub-group
  // sizes share their micro-step graphs.
  Problem p = problem("6.7b", "a100-40g", 8);
  KnobRequest k = knobs({{Knob::kStage, "2,3"},
                         {Knob::kMicroBatch, "1,2"},
                         {Knob::kPrefetchBucket, "1e5,1e6"},
                         {Knob::kSubGroupSize, "1e8,1e9"}});
  EvalOptions reuse, every;
  reuse.threads = 2;
  every.threads = 2;
  every.reuse_outcomes = false;
  SearchResult a = run_search(p, k, {}, reuse);
  SearchResult b = run_search(p, k, {}, every);
  REQUIRE(a.evals.size() == b.evals.size());
  for (size_t i = 0; i < a.evals.size(); ++i) {
    CHECK(a.evals[i].step_time_s == b.evals[i].step_time_s);
    CHECK(a.evals[i].tokens_per_s == b.evals[i].tokens_per_s);
    CHECK(a.evals[i].peak_bytes == b.evals[i].peak_bytes);
    CHECK(a.evals[i].critical_path_s == b.evals[i].critical_path_s);
    CHECK(a.evals[i].verdict == b.evals[i].verdict);
    CHECK(a.evals[i].host_peak_bytes == b.evals[i].host_peak_bytes);
    CHECK(a.evals[i].mfu == b.evals[i].mfu);
    for (int r = 0; r < sim::kNumResources; ++r) {
      CHECK(a.evals[i].resources[r].busy_s == b.evals[i].resources[r].busy_s);
      CHECK(a.evals[i].resources[r].exposed_s == b.evals[i].resources[r].exposed_s);
    }
    for (int t = 0; t < sim::kNumTiers; ++t) {
      CHECK(a.evals[i].at_peak[t].bytes == b.evals[i].at_peak[t].bytes);
    }
  }
  CHECK(a.order == b.order);
  CHECK(a.stats.graphs_reused > 0);
  CHECK(a.stats.steps_reused > 0);
  CHECK(b.stats.graphs_reused == 0);
  CHECK(b.stats.steps_reused == 0);
  // Whole configs answered from an equivalent one build no graph at all.
  CHECK(a.stats.graphs_run + a.stats.graphs_reused < b.stats.graphs_run);
  // Which configs are reused does not depend on which thread took which work (equivalent
  // configs share a unit of work): one thread reuses exactly as many.
  EvalOptions one = reuse;
  one.threads = 1;
  SearchResult c = run_search(p, k, {}, one);
  CHECK(c.stats.steps_reused == a.stats.steps_reused);
  CHECK(c.stats.graphs_run + c.stats.graphs_reused == a.stats.graphs_run + a.stats.graphs_reused);
}

TEST_CASE("a prefetch window that changes the graphs is not taken for an inert one", "[planner]") {
  // 1.3b's smallest module fetch is h^2 = 4.2e6 elements (the attention output): a window below
  // 3 x that changes nothing, one above it lets the gathers run further ahead. Evaluated in one
  // search (one workspace, step reuse on) and each alone, every figure agrees.
  Problem p = problem("1.3b", "a100-40g", 8);
  KnobRequest k = knobs({{Knob::kStage, "3"},
                         {Knob::kOffloadOptimizer, "none"},
                         {Knob::kOffloadParam, "none"},
                         {Knob::kMicroBatch, "1"},
                         {Knob::kCheckpointing, "none"},
                         {Knob::kOverlapComm, "true"},
                         {Knob::kReduceBucket, "5e8"},
                         {Knob::kPrefetchBucket, "1e5,1.2e7,1.3e7,5e7,5e8"},
                         {Knob::kMaxLive, "1e9"},
                         {Knob::kPersistenceThreshold, "1e5"},
                         {Knob::kSubGroupSize, "1e9"}});
  EvalOptions one_thread;
  one_thread.threads = 1;
  SearchResult together = run_search(p, k, {}, one_thread);
  REQUIRE(together.evals.size() == 5);
  CHECK(together.stats.steps_reused >= 1);  // 1e5 and 1.2e7 are both inert
  for (size_t i = 0; i < together.evals.size(); ++i) {
    INFO("prefetch " << together.candidates[i][Knob::kPrefetchBucket]);
    sim::DsConfig d = to_ds_config(together.candidates[i],
                                   base_config(p, together.space.batch), p);
    Evaluation alone = evaluate_one(p, d, /*prune=*/false);
    CHECK(alone.step_time_s == together.evals[i].step_time_s);
    CHECK(alone.peak_bytes == together.evals[i].peak_bytes);
    CHECK(alone.critical_path_s == together.evals[i].critical_path_s);
  }
  // The larger windows do change the schedule (else this test would check nothing).
  CHECK_FALSE(together.evals[0].peak_bytes == together.evals[4].peak_bytes);
}

TEST_CASE("the Pareto front: nothing fitting is both faster and smaller", "[planner]") {
  Problem p = problem("6.7b", "a100-40g", 8);
  SearchResult s = run_search(p, knobs({{Knob::kMicroBatch, "1,2,4"}}), {}, {});
  REQUIRE(!s.pareto.empty());
  for (size_t f : s.pareto) {
    for (size_t i = 0; i < s.evals.size(); ++i) {
      if (!s.evals[i].fits() || i == f) continue;
      bool dominates = s.evals[i].tokens_per_s >= s.evals[f].tokens_per_s &&
                       s.evals[i].peak_bytes[kGpu] <= s.evals[f].peak_bytes[kGpu] &&
                       (s.evals[i].tokens_per_s > s.evals[f].tokens_per_s ||
                        s.evals[i].peak_bytes[kGpu] < s.evals[f].peak_bytes[kGpu]);
      CHECK_FALSE(dominates);
    }
  }
  // The fastest fitting config is on the front.
  CHECK(std::find(s.pareto.begin(), s.pareto.end(), s.order[0]) != s.pareto.end());
}

TEST_CASE("sanity: 20B on 8 A100-40GB needs offload", "[planner]") {
  // 16 bytes/param x 20.6e9 / 8 = 41 GB of model states per GPU under ZeRO-3 alone: more than
  // 40 GiB before a single activation, so only offloading configs can fit.
  Problem p = problem("20b", "a100-40g", 8);
  PlanResult r = run_plan(p);
  REQUIRE(r.recommended);
  CHECK(r.search.candidates[*r.recommended].offload_level() > 0);
  for (size_t i : r.search.order) {
    if (r.search.evals[i].fits()) CHECK(r.search.candidates[i].offload_level() > 0);
  }
  REQUIRE(!r.notes.empty());
  CHECK_THAT(r.notes[0], Catch::StartsWith("only offloading configs fit: without offload "
                                           "nothing fits on 8 GPUs; it would take 16 GPUs"));
}

TEST_CASE("sanity: Llama-3-8B on 8 H100 does not pick offload", "[planner]") {
  Problem p = problem("llama3-8b", "h100", 8);
  PlanResult r = run_plan(p);
  REQUIRE(r.recommended);
  CHECK(r.search.candidates[*r.recommended].offload_level() == 0);
  CHECK(r.notes.empty());
}

TEST_CASE("sanity: 175B on 8 A100-80GB fits only with offload", "[planner]") {
  // 16 x 174.6e9 / 8 = 349 GB of model states per GPU under ZeRO-3: nothing fits without
  // offload; CPU offload alone needs ~2.8 TB of host memory per node (2 TiB installed).
  Problem p = problem("175b", "a100", 8);
  PlanResult r = run_plan(p);
  for (size_t i : r.search.order) {
    if (r.search.evals[i].fits()) CHECK(r.search.candidates[i].offload_level() > 0);
  }
  if (r.recommended) {
    REQUIRE(!r.notes.empty());
    CHECK_THAT(r.notes[0], Catch::StartsWith("only offloading configs fit: without offload "
                                             "nothing fits on 8 GPUs"));
  } else {
    CHECK(!r.what_would_fit.empty());
  }
  // Without NVMe, nothing fits, and the plan says what would.
  PlanResult cpu_only = run_plan(
      p, knobs({{Knob::kOffloadOptimizer, "none,cpu"}, {Knob::kOffloadParam, "none,cpu"}}));
  CHECK_FALSE(cpu_only.recommended);
  REQUIRE(cpu_only.closest);
  bool mentions_nvme = false, mentions_gpus = false;
  for (const std::string& line : cpu_only.what_would_fit) {
    mentions_nvme = mentions_nvme || line.find("NVMe") != std::string::npos;
    mentions_gpus = mentions_gpus || line.rfind("more GPUs", 0) == 0;
  }
  CHECK(mentions_nvme);
  CHECK(mentions_gpus);
}

// What would fit names the real blocker when no GPU count helps.
std::string no_gpu_count_line(const PlanResult& r) {
  for (const std::string& line : r.what_would_fit) {
    if (line.rfind("nothing fits", 0) == 0) return line;
  }
  FAIL("no 'nothing fits' line among what would fit");
  return "";
}

TEST_CASE("when no GPU count fits, the reason names activations or model states truthfully",
          "[planner]") {
  // Llama-2-7B at 110k tokens on A100-80GB: micro-batch 1 with full checkpointing keeps 32
  // layer inputs of 110000 x 4096 x 2 bytes = 26.9 GiB plus one layer's recomputed activations
  // and the loss's logits; with the runtime that is past 76 GiB usable, and more data-parallel
  // GPUs do not shrink it.
  Problem p = problem("llama2-7b", "a100", 8, 110000);
  PlanResult r = run_plan(p, knobs({{Knob::kMicroBatch, "1"}}));
  REQUIRE_FALSE(r.recommended);
  std::string line = no_gpu_count_line(r);
  CHECK_THAT(line, Catch::StartsWith("nothing fits on any number of these GPUs: one sample's "
                                      "activations"));
  CHECK_THAT(line, Catch::Contains("a shorter sequence does"));
  CHECK_THAT(line, !Catch::Contains("model states alone"));
  // Llama-3.1-405B on 32 V100s at 2048 tokens: at 4096 nodes, model states and buffers (18.3 GiB)
  // and the runtime fit the 30.2 GiB usable; the 12.6 GiB of activations do not. This used to
  // blame the model states; it now names the sequence that fits. (Not on these 32 GPUs: NVMe
  // parameter offload pins a reuse buffer of its largest sub-group's full numel, ~33e9 elements
  // per rank here, stage3.py reserve_partitioned_swap_space, past the V100 nodes' host memory.)
  Problem v100 = problem("llama3.1-405b", "v100", 32, 2048);
  v100.precision = sim::Precision::kFp16;
  PlanResult rv = run_plan(v100);
  REQUIRE_FALSE(rv.recommended);
  std::string why = no_gpu_count_line(rv);
  CHECK_THAT(why, Catch::StartsWith("nothing fits on any number of these GPUs: one sample's "
                                    "activations"));
  CHECK_THAT(why, Catch::Contains("a shorter sequence does: --seq-len 1024 fits on 40 GPUs"));
  // A 3 GiB GPU with a short sequence: activations are small (0.4 GiB), but a 175B layer's
  // gathered parameters (its 12288 x 49152 MLP weight alone is 1.1 GiB in bf16) never fit.
  Problem tiny = problem("175b", "a100", 8, 128);
  tiny.cluster.profile.gpu.memory_bytes = 3.0 * (1 << 30);
  PlanResult t = run_plan(tiny, knobs({{Knob::kMicroBatch, "1"}}));
  REQUIRE_FALSE(t.recommended);
  CHECK_THAT(no_gpu_count_line(t), Catch::Contains("the model states and buffers, partitioned and offloaded"));
  // A 1.5 GiB GPU: the 1.5 GiB of CUDA context and NCCL buffers alone do not fit.
  tiny.cluster.profile.gpu.memory_bytes = 1.5 * (1 << 30);
  CHECK_THAT(no_gpu_count_line(run_plan(tiny, knobs({{Knob::kMicroBatch, "1"}}))),
             Catch::Contains("the CUDA context and NCCL buffers alone take 1.5 GiB of the 1.4 GiB"));
}

bool any_line_starts(const PlanResult& r, const std::string& start) {
  for (const std::string& line : r.what_would_fit) {
    if (line.rfind(start, 0) == 0) return true;
  }
  return false;
}

TEST_CASE("what would fit never sends users to more GPUs for what fits on theirs", "[planner]") {
  // Llama-2-70B on 128 A100-40GB, restricted to stages 0-2 without offload: ZeRO-3 fits on these
  // GPUs (21.3 GiB); it used to add "more GPUs: 136 GPUs: ZeRO-3", and stages 0-2 fit on no
  // count (the 16-bit parameters alone are 130 GiB per GPU).
  Problem p = problem("llama2-70b", "a100-40g", 128);
  const KnobRequest narrow = knobs(
      {{Knob::kStage, "0-2"}, {Knob::kOffloadOptimizer, "none"}, {Knob::kOffloadParam, "none"}});
  PlanResult r = run_plan(p, narrow);
  REQUIRE_FALSE(r.recommended);
  CHECK(any_line_starts(r, "on these GPUs: ZeRO-3,"));
  CHECK_FALSE(any_line_starts(r, "more GPUs"));
  CHECK(any_line_starts(r,
                        "with the --stage / --offload-* lists given, nothing fits even on "
                        "4096 nodes"));
  // On 16 of them with stage 0 only: ZeRO-3 + CPU optimizer fits here, so more GPUs are only
  // worth it without offload (48 GPUs, ZeRO-3); more GPUs with offload are not offered.
  Problem p16 = problem("llama2-70b", "a100-40g", 16);
  PlanResult r16 = run_plan(p16, knobs({{Knob::kStage, "0"}}));
  REQUIRE_FALSE(r16.recommended);
  CHECK(any_line_starts(r16, "on these GPUs: ZeRO-3 + CPU optimizer,"));
  CHECK(any_line_starts(r16,
                        "more GPUs and other --stage / --offload-* values: 48 GPUs (6 nodes "
                        "of 8): ZeRO-3,"));
  CHECK_FALSE(any_line_starts(r16, "more GPUs and other --stage / --offload-* values, with"));
  // With a global batch of fewer samples than that count, the line says the batch it implies.
  PlanOptions o;
  o.eval.threads = 2;
  BatchRequest small;
  small.global_batch = 32;
  PlanResult r32 = plan(p16, knobs({{Knob::kStage, "0"}}), small, o);
  CHECK(any_line_starts(r32,
                        "more GPUs and other --stage / --offload-* values: 48 GPUs (6 nodes "
                        "of 8): ZeRO-3,"));
  bool says_batch = false;
  for (const std::string& line : r32.what_would_fit) {
    says_batch = says_batch || line.find("; one sample a GPU is a global batch of 48, not 32") !=
                                   std::string::npos;
  }
  CHECK(says_batch);
  CHECK(r16.what_would_fit != r32.what_would_fit);
  CHECK(any_line_starts(r16, "with the --stage / --offload-* lists given, nothing fits"));
  // A cluster already past the largest count tried says its own node count.
  Problem big = problem("llama2-70b", "a100-40g", 8 * 8192);
  PlanResult rb = run_plan(big, narrow);
  CHECK(any_line_starts(rb,
                        "with the --stage / --offload-* lists given, nothing fits even on "
                        "8192 nodes"));
}

TEST_CASE("what would fit stays within an int of GPUs with huge nodes", "[planner]") {
  // A node of 2^20 GPUs: 4096 such nodes overflowed int and were reported as "--gpus: must be
  // at least 1, got -2147483648".
  Problem p = problem("llama2-7b", "a100", 8);
  p.cluster.profile.node.gpus_per_node = 1 << 20;
  p.cluster = hardware::make_cluster(p.cluster.profile, 4096, 1);
  PlanResult r;
  REQUIRE_NOTHROW(r = run_plan(p, knobs({{Knob::kMicroBatch, "1"}})));
  REQUIRE_FALSE(r.recommended);
  CHECK(any_line_starts(r,
                        "nothing fits even on 2047 nodes of this hardware: GPU memory would "
                        "do, but host memory per node does not"));
}

TEST_CASE("min_gpus_to_fit finds the smallest whole-node count", "[planner]") {
  // 20b without offload on 40 GB GPUs: not on one node of 8 (see above), on two.
  Problem p = problem("20b", "a100-40g", 8);
  SearchSpace s = resolve_search_space(p, {}, {});
  std::optional<GpuCount> g = min_gpus_to_fit(p, s, 0);
  REQUIRE(g);
  CHECK(g->gpus == 16);
  CHECK(g->nodes == 2);
  CHECK(g->how.offload_level() == 0);
}

TEST_CASE("at scale the alternatives answer 'why not a lower stage?' before offload variants",
          "[planner]") {
  // Llama-2-13B on 32 nodes of H100 at one sample a GPU: ZeRO-3 (with MiCS) wins, its offload
  // variants are as fast and crowd the table, and ZeRO-1 and ZeRO-2 fit but lose to their
  // gradient all-reduce. Each stage that has a fitting config is one of the alternatives.
  Problem p = problem("llama2-13b", "h100", 256, 4096);
  PlanOptions o;
  o.eval.threads = 2;
  BatchRequest b;
  b.global_batch = 256;
  PlanResult r = plan(p, knobs({{Knob::kMicroBatch, "1"}}), b, o);
  REQUIRE(r.recommended);
  const SearchResult& s = r.search;
  const int rec_stage = s.candidates[*r.recommended].stage();
  CHECK(rec_stage == 3);
  std::set<int> fitting_stages, listed_stages;
  for (size_t i : s.order) {
    if (s.evals[i].fits() && s.candidates[i].stage() != rec_stage) {
      fitting_stages.insert(s.candidates[i].stage());
    }
  }
  for (const Alternative& a : r.alternatives) listed_stages.insert(s.candidates[a.index].stage());
  CHECK(fitting_stages.count(2) == 1);
  for (int stage : fitting_stages) {
    INFO("stage " << stage << " fits but is not among the alternatives");
    CHECK(listed_stages.count(stage) == 1);
  }
}

TEST_CASE("the explanation lines name what binds", "[planner]") {
  Evaluation e;
  e.simulated = true;
  e.step_time_s = 10;
  e.mfu = 0.5;
  e.critical_path_s = {9.5, 0.3, 0.2, 0, 0, 0};
  CHECK(what_binds(e) ==
        "compute-bound: compute 95% of the step's critical path (MFU 50%), all-gather 3.0%, "
        "gradient reduction 2.0%");
  e.critical_path_s = {6, 0, 0, 0.5, 3.5, 0};
  CHECK(what_binds(e) ==
        "CPU-Adam-bound: CPU optimizer 35% of the step's critical path, compute 60%, host "
        "copies 5.0%");
  e.critical_path_s = {5, 0, 0, 0, 0, 5};
  CHECK_THAT(what_binds(e), Catch::StartsWith("NVMe-bound: NVMe 50%"));
  // A collective: latency 0.5 s of the 4 s the all-gather is on the critical path -> bandwidth
  // dominates;
  // 3 of 4 s -> latency does.
  e.critical_path_s = {5.5, 4, 0.5, 0, 0, 0};
  e.critical_latency_s = {0, 0.5, 0, 0, 0, 0};
  CHECK(what_binds(e) ==
        "communication-bound: all-gather, bandwidth-dominated (40% of the step, latency 5%), "
        "compute 55%, gradient reduction 5.0%");
  e.critical_latency_s = {0, 3, 0, 0, 0, 0};
  CHECK_THAT(what_binds(e),
             Catch::StartsWith("communication-bound: all-gather, latency-dominated (40%"));
}

TEST_CASE("a mixture of experts at ZeRO-3 is planned as a leaf module, and the plan says so",
          "[planner]") {
  // Mixtral-8x7B on 8 A100-80GB: ZeRO-3 fits with the optimizer in CPU memory.
  const KnobRequest k = knobs({{Knob::kStage, "3"},
                               {Knob::kOffloadOptimizer, "cpu"},
                               {Knob::kOffloadParam, "none"},
                               {Knob::kMicroBatch, "1"},
                               {Knob::kCheckpointing, "full"}});
  auto leaf_lines = [&](const std::string& model, const KnobRequest& request) {
    PlanResult r = testing::run_plan_2t(problem(model, "a100", 8, 1024), request);
    REQUIRE(r.recommended);
    int n = 0;
    for (const std::string& line : r.needs) {
      if (line.find("set_z3_leaf_modules") == std::string::npos) continue;
      ++n;
      CHECK_THAT(line, Catch::StartsWith("mixture of experts at ZeRO-3: the prediction gathers "
                                         "each MoE block"));
      CHECK_THAT(line, Catch::Contains("MixtralSparseMoeBlock"));
      // transformers 5 (the default) keeps the experts in one module: no hang without a leaf.
      CHECK_THAT(line, Catch::Contains("the router, the experts' 3D tensors as one module)"));
      CHECK_THAT(line, Catch::Contains("not unsafe"));
    }
    return n;
  };
  CHECK(leaf_lines(std::string(ZPLAN_SOURCE_DIR) + "/examples/hf/Mixtral-8x7B-v0.1.json", k) == 1);
  // Which transformers release's experts the prediction assumes, for any stage.
  PlanResult mixtral = testing::run_plan_2t(
      problem(std::string(ZPLAN_SOURCE_DIR) + "/examples/hf/Mixtral-8x7B-v0.1.json", "a100", 8,
              1024),
      k);
  REQUIRE(mixtral.recommended);
  int says = 0;
  for (const std::string& line : mixtral.needs) {
    says += line.rfind("transformers: the prediction assumes transformers 5's experts", 0) == 0;
  }
  CHECK(says == 1);
  // Dense models need nothing of the kind.
  CHECK(leaf_lines("6.7b", k) == 0);
  // DeepSeek-V2's DeepseekV2Moe is not among DeepSpeed's default leaf classes: the written file
  // lists it, and the plan says so.
  const Problem ds = problem(std::string(ZPLAN_SOURCE_DIR) + "/tests/models/data/DeepSeek-V2-Lite.json",
                             "a100", 8, 1024);
  PlanResult r = testing::run_plan_2t(ds, k);
  REQUIRE(r.recommended);
  const sim::DsConfig written =
      to_ds_config(r.search.candidates[*r.recommended], base_config(ds, r.search.space.batch), ds);
  CHECK(written.zero.leaf_module.classes.back() == "DeepseekV2Moe");
  CHECK(sim::missing_moe_leaf_class(ds.model, written.zero).empty());
  bool said = false;
  for (const std::string& line : r.needs) {
    said = said || line.find("the written file lists DeepseekV2Moe in "
                             "zero_optimization.leaf_module.classes") != std::string::npos;
  }
  CHECK(said);
}

TEST_CASE("the HTML report is self-contained", "[planner]") {
  Problem p = problem("1.3b", "a100-40g", 8);
  PlanResult r = run_plan(p, knobs({{Knob::kMicroBatch, "1,4"}, {Knob::kStage, "2,3"}}));
  REQUIRE(r.recommended);
  StepTimeline t = capture_timeline(p, to_ds_config(r.search.candidates[*r.recommended],
                                                    base_config(p, r.search.space.batch), p));
  REQUIRE(!t.shown.empty());
  CHECK(t.shown.back().with_optimizer);
  ReportInput in;
  in.problem = &p;
  in.search = &r.search;
  in.plan = &r;
  in.chosen = r.recommended;
  in.timeline = &t;
  in.title = "test";
  std::string html = render_report_html(in);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("<svg") != std::string::npos);
  CHECK(html.find("Pareto front") != std::string::npos);
  // Nothing fetched, no scripts.
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("http://") == std::string::npos);
  CHECK(html.find("https://") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  // A pure function of its inputs.
  CHECK(render_report_html(in) == html);
}

}  // namespace
}  // namespace zplan::planner
