// Knob lists as the command line writes them: values, ranges, words, and one-line errors.
#include "sim/knobs.h"

#include <catch2/catch.hpp>

#include "base/input_error.h"

namespace zplan::sim {
namespace {

KnobValues parse(Knob k, const std::string& text) { return parse_knob_values(k, text, "--x"); }

// The InputError's message, which must be one line naming the flag.
std::string error_of(Knob k, const std::string& text) {
  try {
    parse_knob_values(k, text, knob_flag(k));
  } catch (const InputError& e) {
    std::string what = e.what();
    CHECK(what.find('\n') == std::string::npos);
    CHECK(what.rfind(knob_flag(k), 0) == 0);
    return what;
  }
  FAIL("no InputError for '" << text << "'");
  return "";
}

TEST_CASE("knob lists: values, integer and geometric ranges, words", "[sim]") {
  CHECK(parse(Knob::kStage, "1,2,3") == KnobValues{1, 2, 3});
  CHECK(parse(Knob::kStage, "3, 1") == KnobValues{3, 1});  // order kept
  CHECK(parse(Knob::kMicroBatch, "1-8") == KnobValues{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(parse(Knob::kMicroBatch, "2-8:2,1") == KnobValues{2, 4, 6, 8, 1});
  CHECK(parse(Knob::kMicroBatch, "4,4,2") == KnobValues{4, 2});  // repeats dropped
  CHECK(parse(Knob::kReduceBucket, "5e7,2e8,5e8") ==
        KnobValues{50'000'000, 200'000'000, 500'000'000});
  // Sizes double from A while <= B, or multiply by the factor after '*' (or 'x').
  CHECK(parse(Knob::kReduceBucket, "5e7-4e8") ==
        KnobValues{50'000'000, 100'000'000, 200'000'000, 400'000'000});
  CHECK(parse(Knob::kPrefetchBucket, "1e7-1e9*10") ==
        KnobValues{10'000'000, 100'000'000, 1'000'000'000});
  CHECK(parse(Knob::kPrefetchBucket, "0") == KnobValues{0});  // "no prefetch" is a setting
  CHECK(parse(Knob::kOffloadOptimizer, "none,cpu,NVMe") == KnobValues{0, 1, 2});
  CHECK(parse(Knob::kCheckpointing, "none,full") == KnobValues{0, 1});
  // cpu: full checkpointing with cpu_checkpointing.
  CHECK(parse(Knob::kCheckpointing, "none,full,CPU") == KnobValues{0, 1, 2});
  CHECK(parse(Knob::kOverlapComm, "true,off") == KnobValues{1, 0});
}

TEST_CASE("knob values print the way people write them", "[sim]") {
  CHECK(format_knob_value(Knob::kReduceBucket, 500'000'000) == "5e8");
  CHECK(format_knob_value(Knob::kReduceBucket, 37'748'736) == "37748736");
  CHECK(format_knob_value(Knob::kReduceBucket, 25'000'000) == "25e6");
  CHECK(format_knob_value(Knob::kOffloadParam, 2) == "nvme");
  CHECK(format_knob_value(Knob::kCheckpointing, 1) == "full");
  CHECK(format_knob_value(Knob::kCheckpointing, 2) == "cpu");
  CHECK(format_knob_values(Knob::kStage, {1, 2}) == "1,2");
}

TEST_CASE("bad knob lists are one-line InputErrors naming the flag", "[sim]") {
  CHECK(error_of(Knob::kStage, "").find("empty list") != std::string::npos);
  CHECK(error_of(Knob::kStage, "1,,2").find("empty item") != std::string::npos);
  CHECK(error_of(Knob::kMicroBatch, "8-1").find("runs backwards") != std::string::npos);
  CHECK(error_of(Knob::kReduceBucket, "5e8-5e7").find("runs backwards") != std::string::npos);
  CHECK(error_of(Knob::kStage, "4").find("out of range") != std::string::npos);
  CHECK(error_of(Knob::kMicroBatch, "0").find("out of range") != std::string::npos);
  CHECK(error_of(Knob::kReduceBucket, "0").find("out of range") != std::string::npos);
  CHECK(error_of(Knob::kStage, "two").find("not a number") != std::string::npos);
  CHECK(error_of(Knob::kMicroBatch, "1.5").find("not a whole number") != std::string::npos);
  CHECK(error_of(Knob::kOffloadParam, "gpu").find("none, cpu or nvme") != std::string::npos);
  CHECK(error_of(Knob::kOffloadParam, "cpu-nvme").find("ranges are for numbers") !=
        std::string::npos);
  CHECK(error_of(Knob::kMicroBatch, "1-100000").find("more than") != std::string::npos);
  // A step of 0 or less would never reach the end of the range.
  CHECK(error_of(Knob::kStage, "0-3:0") ==
        "--stage: '0-3:0': the step must be a positive integer, got 0");
  CHECK(error_of(Knob::kMicroBatch, "1-8:-2").find("the step must be a positive integer") !=
        std::string::npos);
  CHECK(parse(Knob::kStage, "0-3:2") == KnobValues{0, 2});
  CHECK(parse(Knob::kStage, "0-3:9") == KnobValues{0});
}

TEST_CASE("one knob value, as the single-config commands' flags read it", "[sim]") {
  CHECK(parse_knob_value(Knob::kOffloadOptimizer, "CPU", "--offload-optimizer") == 1);
  CHECK(parse_knob_value(Knob::kReduceBucket, "5e8", "--reduce-bucket") == 500'000'000);
  CHECK_THROWS_WITH(parse_knob_value(Knob::kReduceBucket, "1e30", "--reduce-bucket"),
                    "--reduce-bucket: '1e30' is out of range (1 to 1e15)");
  CHECK_THROWS_WITH(parse_knob_value(Knob::kPrefetchBucket, "1e6,2e6", "--prefetch-bucket"),
                    Catch::Contains("not a number"));
}

TEST_CASE("which stages read which knob", "[sim]") {
  for (int64_t stage = 0; stage <= 3; ++stage) {
    CHECK((stage_ignores(Knob::kPrefetchBucket, stage) == nullptr) == (stage == 3));
    CHECK((stage_ignores(Knob::kAllgatherBucket, stage) == nullptr) == (stage == 1 || stage == 2));
    CHECK((stage_ignores(Knob::kReduceBucket, stage) == nullptr) == (stage != 0));
    CHECK(stage_ignores(Knob::kMicroBatch, stage) == nullptr);
  }
}

TEST_CASE("knob NAME=LIST flags take ds_config names and rejects unknown knobs", "[sim]") {
  KnobRequest r;
  r.set_from_assignment("stage3_max_live_parameters=1e8,1e9", "--knob");
  REQUIRE(r.given(Knob::kMaxLive));
  CHECK(r.values(Knob::kMaxLive) == KnobValues{100'000'000, 1'000'000'000});
  r.set_from_assignment("reduce-bucket=5e8", "--knob");  // a flag name works too
  CHECK(r.values(Knob::kReduceBucket) == KnobValues{500'000'000});
  CHECK_THROWS_WITH(r.set_from_assignment("bucket_size=1", "--knob"),
                    Catch::StartsWith("--knob: unknown knob 'bucket_size'; knobs: stage,"));
  CHECK_THROWS_WITH(r.set_from_assignment("stage", "--knob"),
                    Catch::Contains("is not NAME=VALUES"));
  CHECK_THROWS_WITH(r.set_from_assignment("max_live_parameters=1", "--knob"),
                    Catch::Contains("given twice"));
  CHECK(find_knob("--persistence-threshold") == Knob::kPersistenceThreshold);
  CHECK(find_knob("train_micro_batch_size_per_gpu") == Knob::kMicroBatch);
  CHECK_FALSE(find_knob("gradient_clipping").has_value());
}

}  // namespace
}  // namespace zplan::sim
