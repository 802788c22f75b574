// The search space: the default global batch, micro-batch lists, contradictions between lists,
// and that every enumerated configuration is one DeepSpeed accepts, with consistent batch keys.
#include "planner/search_space.h"

#include <set>

#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "tests/planner/planner_test_util.h"

namespace zplan::planner {
namespace {

using testing::knobs;
using testing::problem;

SearchSpace space(const Problem& p, const KnobRequest& k = {}, const BatchRequest& b = {}) {
  return resolve_search_space(p, k, b);
}

// The message of the InputError `f` throws; it must be one line.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const InputError& e) {
    std::string what = e.what();
    CHECK(what.find('\n') == std::string::npos);
    return what;
  }
  FAIL("no InputError");
  return "";
}

TEST_CASE("the default global batch is about 2M tokens, a power of two per GPU", "[planner]") {
  // 2^21 tokens / (2048 tokens x 8 GPUs) = 128 samples per GPU exactly.
  SearchSpace s = space(problem("20b", "a100", 8));
  CHECK(s.batch.global_batch == 1024);
  CHECK(s.batch.per_gpu == 128);
  // Micro-batches: divisors of 128 with micro-batch x 2048 tokens <= 131072: 1 .. 64.
  CHECK(s.values[index(Knob::kMicroBatch)] == KnobValues{1, 2, 4, 8, 16, 32, 64});
  // llama3-8b trains 8192-token sequences: 2^21 / (8192 x 8) = 32 per GPU.
  CHECK(space(problem("llama3-8b", "h100", 8)).batch.global_batch == 256);
  // 24 GPUs: 2^21 / (2048 x 24) = 42.7 per GPU, the nearest power of two in log space is 32.
  CHECK(space(problem("20b", "a100", 24)).batch.per_gpu == 32);
  // Thousands of GPUs: at least one sample each.
  CHECK(space(problem("125m", "a100", 2048)).batch.per_gpu == 1);
  // One token per sample (tiny-mlp) on 2 GPUs: 2^20 per GPU is past the 10^6 zplan plans for,
  // so the default stops at 2^19 and says so (it used to fail on a --global-batch not given).
  SearchSpace tiny = space(problem("tiny-mlp", "a100", 2));
  CHECK(tiny.batch.per_gpu == 524288);
  CHECK(tiny.batch.origin == "default (about 2M tokens, at most 524288 samples per GPU)");
}

TEST_CASE("batch requests: samples, tokens, gas", "[planner]") {
  Problem p = problem("20b", "a100", 8);
  BatchRequest b;
  b.global_batch = 512;
  CHECK(space(p, {}, b).batch.per_gpu == 64);
  b = {};
  b.global_batch_tokens = 4'000'000;  // 4e6 / 2048 / 8 = 244.1 -> 244 per GPU
  CHECK(space(p, {}, b).batch.global_batch == 244 * 8);
  b = {};
  b.gradient_accumulation = 32;  // 128 per GPU / 32 = micro-batch 4
  CHECK(space(p, {}, b).values[index(Knob::kMicroBatch)] == KnobValues{4});
  b = {};
  b.gradient_accumulation = 3;
  b.global_batch = 48;  // with --micro-batch 2: 2 x 3 x 8 = 48
  CHECK(space(p, knobs({{Knob::kMicroBatch, "2"}}), b).values[index(Knob::kMicroBatch)] ==
        KnobValues{2});
  // Micro-batches that do not divide the per-GPU batch are skipped, with a note.
  SearchSpace s = space(p, knobs({{Knob::kMicroBatch, "1-8"}}));
  CHECK(s.values[index(Knob::kMicroBatch)] == KnobValues{1, 2, 4, 8});
  REQUIRE(s.notes.size() == 1);
  CHECK(s.notes[0].find("skipped micro-batch 3,5,6,7") != std::string::npos);
}

TEST_CASE("bad batch requests are one-line InputErrors", "[planner]") {
  Problem p = problem("20b", "a100", 8);
  BatchRequest b;
  b.global_batch = 1001;
  CHECK_THAT(error_of([&] { space(p, {}, b); }),
             Catch::StartsWith("--global-batch: 1001 is not a multiple of the 8 GPUs"));
  b.global_batch_tokens = 1'000'000;
  CHECK_THAT(error_of([&] { space(p, {}, b); }), Catch::Contains("not both"));
  b = {};
  b.gradient_accumulation = 3;
  CHECK_THAT(error_of([&] { space(p, {}, b); }),
             Catch::StartsWith("--gas: 3 does not divide the 128 samples per GPU"));
  CHECK_THAT(error_of([&] {
               space(p, knobs({{Knob::kMicroBatch, "3,5"}}));
             }),
             Catch::StartsWith("--micro-batch: none of 3,5 divides"));
  CHECK_THAT(error_of([] { hardware::make_cluster(hardware::load_profile("a100"), 0, 1); }),
             Catch::StartsWith("--gpus"));
}

TEST_CASE("contradictory knob lists are one-line InputErrors naming the flags", "[planner]") {
  Problem p = problem("20b", "a100", 8);
  CHECK(error_of([&] {
          space(p, knobs({{Knob::kStage, "1"}, {Knob::kOffloadParam, "cpu"}}));
        }) ==
        "--offload-param: cpu cannot be combined with --stage 1: parameter offload is "
        "valid only with ZeRO stage 3");
  CHECK_THAT(error_of([&] {
               space(p, knobs({{Knob::kStage, "1,3"}, {Knob::kOffloadParam, "cpu"}}));
             }),
             Catch::StartsWith("--stage: 1 cannot be combined with --offload-param cpu"));
  CHECK_THAT(error_of([&] {
               space(p, knobs({{Knob::kStage, "1,2"}, {Knob::kOffloadOptimizer, "nvme"}}));
             }),
             Catch::Contains("NVMe optimizer offload needs ZeRO stage 3"));
  CHECK_THAT(error_of([&] {
               space(p, knobs({{Knob::kStage, "0"}, {Knob::kOffloadOptimizer, "cpu"}}));
             }),
             Catch::Contains("optimizer offload needs ZeRO stage 1, 2 or 3"));
  CHECK_THAT(error_of([&] {
               space(p, knobs({{Knob::kStage, "1,2"}, {Knob::kPrefetchBucket, "1e7"}}));
             }),
             Catch::StartsWith("--prefetch-bucket: only ZeRO stage 3 reads it, but --stage is "
                               "1,2"));
  CHECK_THAT(error_of([&] {
               space(p, knobs({{Knob::kStage, "0"}, {Knob::kReduceBucket, "1e7"}}));
             }),
             Catch::StartsWith("--reduce-bucket: ZeRO stage 0 does not read it"));
  CHECK_THAT(error_of([&] {
               Problem q = p;
               q.headroom = 1.5;
               space(q);
             }),
             Catch::StartsWith("--headroom"));
  // Lists that leave something valid are fine.
  CHECK_NOTHROW(space(p, knobs({{Knob::kStage, "3"}, {Knob::kOffloadParam, "cpu"}})));
  CHECK_NOTHROW(space(p, knobs({{Knob::kOffloadParam, "nvme"}})));  // stages default to 0-3
}

TEST_CASE("the base config, built field by field, is what DeepSpeed reads of the same JSON",
          "[planner]") {
  // base_config sets DsConfig's fields directly; parse_ds_config of the equivalent ds_config
  // (precision block, stage 0, the two batch keys) must resolve to the same config.
  for (sim::Precision precision :
       {sim::Precision::kBf16, sim::Precision::kFp16, sim::Precision::kFp32}) {
    Problem p = problem("125m", "a100", 8);
    p.precision = precision;
    const BatchPlan batch = space(p).batch;
    nlohmann::json j = {{"zero_optimization", {{"stage", 0}}},
                        {"train_batch_size", batch.global_batch},
                        {"train_micro_batch_size_per_gpu", batch.per_gpu}};
    if (precision != sim::Precision::kFp32) j[sim::precision_name(precision)] = {{"enabled", true}};
    sim::ParseContext context;
    context.dp_world_size = p.cluster.gpus;
    const sim::DsConfig parsed = sim::parse_ds_config(j, "base", context);
    const sim::DsConfig built = base_config(p, batch);
    INFO(sim::precision_name(precision));
    CHECK(sim::ds_config_to_json(built) == sim::ds_config_to_json(parsed));
    CHECK(built.zero.overlap_comm == parsed.zero.overlap_comm);
    CHECK(built.grad_accum_dtype == parsed.grad_accum_dtype);
    CHECK_NOTHROW(sim::validate_ds_config(built, p.cluster.gpus, "base"));
  }
}

TEST_CASE("every enumerated config is valid, canonical and distinct", "[planner]") {
  for (const char* model : {"20b", "llama3-8b", "1.3b"}) {
    Problem p = problem(model, "a100", 8);
    SearchSpace s = space(p, knobs({{Knob::kOverlapComm, "true,false"}}));
    std::vector<Candidate> cs = enumerate_candidates(p, s);
    REQUIRE(!cs.empty());
    const sim::DsConfig base = base_config(p, s.batch);
    std::set<std::array<int64_t, kNumKnobs>> seen;
    std::set<int> families;
    for (const Candidate& c : cs) {
      CHECK(seen.insert(c.v).second);
      families.insert(c.family());
      sim::DsConfig d = to_ds_config(c, base, p);
      CHECK(d.train_batch_size == d.micro_batch * d.gradient_accumulation_steps * 8);
      CHECK(d.train_batch_size == s.batch.global_batch);
      // Stage 0 reads none of the ZeRO knobs: they keep DeepSpeed's defaults.
      if (c.stage() == 0) {
        CHECK(c[Knob::kOverlapComm] == 0);
        CHECK(c[Knob::kReduceBucket] == kDeepSpeedBucket);
      }
      if (c.stage() != 3) CHECK(c[Knob::kPrefetchBucket] == kDeepSpeedPrefetch);
    }
    // 4 stages: stage 0 (1), 1 (2 optimizer devices), 2 (2), 3 (3 x 3) = 14 families.
    CHECK(families.size() == 14);
    // validate_ds_config round-trips through parse_ds_config; a sample of each family is
    // enough to keep this fast (the construction does not depend on the other knobs).
    std::set<int> checked;
    for (const Candidate& c : cs) {
      if (!checked.insert(c.family() * 2 + static_cast<int>(c[Knob::kCheckpointing])).second) {
        continue;
      }
      CHECK_NOTHROW(sim::validate_ds_config(to_ds_config(c, base, p), 8, "candidate"));
    }
  }
}

TEST_CASE("persistence thresholds that keep the same parameters resident appear once",
          "[planner]") {
  // 20b: hidden 6144, so the defaults 1e5 and 10 x 6144 = 61440 both keep exactly the biases and
  // norm weights (6144 elements; the next size up is 6144 x 3 x 6144) resident.
  Problem p = problem("20b", "a100", 8);
  SearchSpace s = space(p, knobs({{Knob::kStage, "3"}, {Knob::kMicroBatch, "1"}}));
  std::set<int64_t> thresholds;
  for (const Candidate& c : enumerate_candidates(p, s)) {
    thresholds.insert(c[Knob::kPersistenceThreshold]);
  }
  CHECK(thresholds == std::set<int64_t>{kDeepSpeedPersistence});
  // A user's list is kept as given.
  s = space(p, knobs({{Knob::kStage, "3"}, {Knob::kPersistenceThreshold, "1e5,61440"}}));
  thresholds.clear();
  for (const Candidate& c : enumerate_candidates(p, s)) {
    thresholds.insert(c[Knob::kPersistenceThreshold]);
  }
  CHECK(thresholds.size() == 2);
}

}  // namespace
}  // namespace zplan::planner
