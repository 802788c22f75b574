// Tests of the ds_config batch keys (sim/ds_config/zero_config_batch.cc) against DeepSpeed 0.19's
// _set_batch_related_parameters and _batch_assertion (reference/deepspeed_internals.md §1.3).
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "sim/ds_config/zero_config.h"
#include "tests/sim/zero_config_test_util.h"

namespace zplan::sim {
namespace {

using Catch::Matchers::Contains;
using nlohmann::json;
using namespace testing;

TEST_CASE("batch keys follow DeepSpeed's _set_batch_related_parameters", "[zero_config]") {
  auto batch = [](json j) {
    DsConfig c = parse(j);
    return std::vector<int64_t>{c.train_batch_size, c.micro_batch, c.gradient_accumulation_steps};
  };
  using V = std::vector<int64_t>;
  // Two of them determine the third: train = micro x gas x 8.
  CHECK(batch({{"train_batch_size", 64},
               {"train_micro_batch_size_per_gpu", 2},
               {"gradient_accumulation_steps", 4}}) == V{64, 2, 4});
  CHECK(batch({{"train_batch_size", 64}, {"train_micro_batch_size_per_gpu", 2}}) == V{64, 2, 4});
  CHECK(batch({{"train_batch_size", 64}, {"gradient_accumulation_steps", 2}}) == V{64, 4, 2});
  CHECK(batch({{"train_micro_batch_size_per_gpu", 2}, {"gradient_accumulation_steps", 3}}) ==
        V{48, 2, 3});
  // Only train: accumulation 1, micro = train / GPUs. Only micro: accumulation 1.
  CHECK(batch({{"train_batch_size", 32}}) == V{32, 4, 1});
  CHECK(batch({{"train_micro_batch_size_per_gpu", 3}}) == V{24, 3, 1});
  CHECK(batch({{"train_micro_batch_size_per_gpu", 3.0}, {"train_batch_size", nullptr}}) ==
        V{24, 3, 1});

  SECTION("inconsistent keys are an error at /train_batch_size") {
    CHECK_THAT(error_of({{"train_batch_size", 65},
                         {"train_micro_batch_size_per_gpu", 2},
                         {"gradient_accumulation_steps", 4}}),
               Contains("t.json: /train_batch_size: train_batch_size 65 must equal"));
    // DeepSpeed derives accumulation as 100 // 4 // 8 = 3 and fails on 4 x 3 x 8 = 96; the
    // message says why: the division does not come out even.
    CHECK(error_of({{"train_batch_size", 100}, {"train_micro_batch_size_per_gpu", 4}}) ==
          "t.json: /train_batch_size: train_batch_size 100 is not a multiple of "
          "train_micro_batch_size_per_gpu 4 x 8 data-parallel GPUs = 32");
    CHECK(error_of({{"train_batch_size", 100}, {"gradient_accumulation_steps", 4}}) ==
          "t.json: /train_batch_size: train_batch_size 100 is not a multiple of "
          "gradient_accumulation_steps 4 x 8 data-parallel GPUs = 32");
    // Fewer samples than GPUs: micro would derive to 0.
    CHECK(error_of({{"train_batch_size", 4}}) ==
          "t.json: /train_batch_size: train_batch_size 4 is not a multiple of the 8 data-parallel "
          "GPUs");
    CHECK_THAT(error_of({{"train_batch_size", 12}}), Contains("/train_batch_size"));
  }
  SECTION("neither train_batch_size nor the micro-batch is an error") {
    CHECK_THAT(error_of(json::object()), Contains("t.json: gives neither train_batch_size"));
    CHECK_THAT(error_of({{"gradient_accumulation_steps", 2}}), Contains("neither"));
  }
  SECTION("values must be positive integers") {
    CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", 0}}),
               Contains("t.json: /train_micro_batch_size_per_gpu: must be a positive integer"));
    CHECK_THAT(error_of({{"train_batch_size", -8}}), Contains("/train_batch_size"));
    CHECK_THAT(
        error_of({{"train_micro_batch_size_per_gpu", 1}, {"gradient_accumulation_steps", 0}}),
        Contains("/gradient_accumulation_steps"));
    CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", "4"}}),
               Contains("/train_micro_batch_size_per_gpu: must be an integer"));
    CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", 1.5}}),
               Contains("/train_micro_batch_size_per_gpu"));
    // Counts whose products still fit 64 bits but no real run has (negative step times before).
    CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", 1},
                         {"gradient_accumulation_steps", 1'000'000'000'000LL}}),
               Contains("/gradient_accumulation_steps: 1000000000000 is more than the 1000000"));
    CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", 1'000'000'000}}),
               Contains("/train_micro_batch_size_per_gpu: 1000000000 is more than the 1000000"));
    CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", 4'000'000'000'000LL},
                         {"gradient_accumulation_steps", 4'000'000'000'000LL}}),
               Contains("too large"));
  }
  SECTION("command-line values fill missing keys and must agree with the file") {
    ParseContext context = context8();
    context.micro_batch = 2;
    DsConfig c = parse({{"train_batch_size", 64}}, context);
    CHECK(c.gradient_accumulation_steps == 4);
    CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", 4}}, context),
               Contains("t.json: /train_micro_batch_size_per_gpu: is 4 in the file, but "
                        "--micro-batch says 2"));
    ParseContext gas = context8();
    gas.gradient_accumulation_steps = 3;
    CHECK_THAT(
        error_of({{"train_micro_batch_size_per_gpu", 4}, {"gradient_accumulation_steps", 2}}, gas),
        Contains("/gradient_accumulation_steps: is 2 in the file, but --gas says 3"));
    ParseContext global = context8();
    global.train_batch_size = 128;
    CHECK_THAT(error_of({{"train_batch_size", 64}}, global), Contains("--global-batch"));
    ParseContext bad = context8();
    bad.micro_batch = 0;
    CHECK_THAT(error_of({{"train_batch_size", 64}}, bad), Contains("--micro-batch: must be"));
    // A mismatch made by a command-line value names the flag in the message.
    ParseContext m3 = context8();
    m3.micro_batch = 3;
    CHECK_THAT(error_of({{"train_batch_size", 100}}, m3), Contains("(--micro-batch)"));
  }
  SECTION("a data-parallel world below 1 is an error") {
    ParseContext zero = context8();
    zero.dp_world_size = 0;
    CHECK_THAT(error_of({{"train_batch_size", 64}}, zero), Contains("t.json: the data-parallel"));
  }
}

}  // namespace
}  // namespace zplan::sim
