// Tests of reading the ZeRO++ (hpZ, qwZ, qgZ) and MiCS keys of zero_optimization (sim/ds_config/
// zero_config.h) as DeepSpeed 0.19 reads and checks them: at stage 3, and where it does not read
// them. The rest of the reader: zero_config_test.cc.
#include "sim/ds_config/zero_config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "base/json_reader.h"
#include "tests/sim/zero_config_test_util.h"

namespace zplan::sim {
namespace {

using Catch::Matchers::Contains;
using nlohmann::json;
using namespace testing;

TEST_CASE("ZeRO++ and MiCS keys are read at stage 3 and checked as DeepSpeed checks them",
          "[zero_config]") {
  const json z3 = {{"stage", 3}};
  DsConfig c = parse(with_zero(merged(z3, {{"zero_hpz_partition_size", 4},
                                           {"zero_quantized_weights", true},
                                           {"zero_quantized_gradients", true}})));
  CHECK(c.zero.hpz_partition_size == 4);
  CHECK(c.zero.hpz());
  CHECK(c.zero.quantized_weights);
  CHECK(c.zero.quantized_gradients);
  CHECK_FALSE(c.zero.mics());
  CHECK_FALSE(c.zero.other.contains("zero_hpz_partition_size"));
  json written = ds_config_to_json(c);
  CHECK(written["zero_optimization"]["zero_hpz_partition_size"] == 4);
  CHECK(written["zero_optimization"]["zero_quantized_weights"] == true);
  CHECK(written["zero_optimization"]["zero_quantized_gradients"] == true);

  c = parse(with_zero(merged(z3, {{"mics_shard_size", 4},
                                  {"mics_hierarchical_params_gather", true}})));
  CHECK(c.zero.mics());
  CHECK(c.zero.mics_shard_size == 4);
  CHECK(c.zero.mics_hierarchical_params_gather);
  written = ds_config_to_json(c);
  CHECK(written["zero_optimization"]["mics_shard_size"] == 4);
  CHECK(written["zero_optimization"]["mics_hierarchical_params_gather"] == true);
  // Off values are not written: a plain ZeRO-3 file stays plain.
  c = parse(with_zero(merged(z3, {{"mics_shard_size", -1}, {"zero_hpz_partition_size", 1}})));
  CHECK_FALSE(c.zero.hpz());
  CHECK_FALSE(c.zero.mics());
  written = ds_config_to_json(c);
  CHECK_FALSE(written["zero_optimization"].contains("zero_hpz_partition_size"));
  CHECK_FALSE(written["zero_optimization"].contains("mics_shard_size"));
  // 0 is accepted (Field(ge=0)) and means off, as 1 does.
  CHECK_FALSE(parse(with_zero(merged(z3, {{"zero_hpz_partition_size", 0}}))).zero.hpz());

  // What DeepSpeed asserts at set-up (dp world 8 here).
  CHECK(error_of(with_zero(merged(z3, {{"mics_shard_size", 3}}))) ==
        "t.json: /zero_optimization/mics_shard_size: 3 does not divide the 8 data-parallel "
        "ranks (DeepSpeed's _generate_mics_config asserts it)");
  CHECK_THAT(error_of(with_zero(merged(z3, {{"mics_shard_size", 16}}))),
             Contains("mics_shard_size: 16 does not divide the 8"));
  CHECK_THAT(error_of(with_zero(merged(z3, {{"zero_hpz_partition_size", 3}}))),
             Contains("/zero_optimization/zero_hpz_partition_size: 3 does not divide the 8"));
  // hpz above the world is min(hpz, world): one group of everyone.
  CHECK_NOTHROW(parse(with_zero(merged(z3, {{"zero_hpz_partition_size", 16}}))));
  CHECK_THAT(error_of(with_zero(merged(z3, {{"zero_hpz_partition_size", -1}}))),
             Contains("zero_hpz_partition_size: must not be negative"));
  CHECK_THAT(error_of(with_zero(merged(z3, {{"zero_quantized_gradients", true},
                                            {"reduce_scatter", false}}))),
             Contains("/zero_optimization/reduce_scatter: must stay true with "
                      "zero_quantized_gradients"));
  CHECK_THAT(error_of(with_zero(merged(z3, {{"zero_quantized_gradients", true},
                                            {"zeropp_loco_param", {{"err_beta", 0.8}}}}))),
             Contains("/zero_optimization/zeropp_loco_param: not modelled: LoCo-ZeRO++"));
  for (const char* key : {"zero_quantized_weights", "zero_quantized_gradients"}) {
    CHECK_THAT(error_of(with_zero(merged(z3, {{"mics_shard_size", 4}, {key, true}}))),
               Contains(std::string("/zero_optimization/") + key +
                        ": cannot be combined with mics_shard_size"));
  }
  CHECK_THAT(error_of(with_zero(merged(z3, {{"mics_shard_size", 4},
                                            {"zero_hpz_partition_size", 2}}))),
             Contains("zero_hpz_partition_size: cannot be combined with mics_shard_size"));
  CHECK_THAT(error_of(with_zero(merged(z3, {{"mics_shard_size", 4},
                                            {"offload_optimizer", {{"device", "cpu"}}}}))),
             Contains("/zero_optimization/offload_optimizer/device: MiCS with replicas"));
  // One shard of the whole world has no replicas, so nothing to all-reduce: offload runs.
  CHECK_NOTHROW(parse(with_zero(merged(z3, {{"mics_shard_size", 8},
                                            {"offload_optimizer", {{"device", "cpu"}}}}))));
  CHECK_THAT(error_of(with_zero(merged(z3, {{"zero_hpz_partition_size", 2},
                                            {"offload_param", {{"device", "cpu"}}}}))),
             Contains("zero_hpz_partition_size: not modelled with offload_param"));
  CHECK_THAT(error_of(with_zero(merged(z3, {{"zero_quantized_nontrainable_weights", true}}))),
             Contains("zero_quantized_nontrainable_weights: not modelled: frozen weights"));
  CHECK_THAT(error_of(with_zero(merged(z3, {{"zero_quantized_weights", 2}}))),
             Contains("zero_quantized_weights: must be true or false"));
  // Stages 0-2 do not read them: any value is accepted and changes nothing.
  c = parse(with_zero({{"stage", 2}, {"mics_shard_size", 3}, {"zero_quantized_gradients", true}}));
  CHECK_FALSE(c.zero.mics());
  CHECK_FALSE(ds_config_to_json(c)["zero_optimization"].contains("mics_shard_size"));
}

TEST_CASE("ZeRO++ and MiCS keys where DeepSpeed does not read them: a note, as offload_param's",
          "[zero_config]") {
  // DeepSpeed 0.19 reads them in stage 3's code only (partition_parameters.py Init, stage3.py,
  // engine.py's stage-3 branch), and mics_hierarchical_params_gather only with a MiCS shard: the
  // trial's hpz_stage2.json, mics_stage2.json and qw_stage1.json train as plain ZeRO-2 / ZeRO-1.
  std::vector<std::string> notes;
  ParseContext context = context8();
  context.notes = &notes;
  // bf16, so that the only notes are these (a file without a precision block gets one).
  auto zero = [](json block) {
    return merged(with_zero(std::move(block)), {{"bf16", {{"enabled", true}}}});
  };
  const json zpp = {{"zero_hpz_partition_size", 8},
                    {"zero_quantized_weights", true},
                    {"zero_quantized_gradients", true},
                    {"mics_shard_size", 4},
                    {"mics_hierarchical_params_gather", true}};
  const json stage2 = zero(merged({{"stage", 2}}, zpp));
  DsConfig c = parse(stage2, context);
  const ZeroConfig defaults;
  CHECK(c.zero.hpz_partition_size == defaults.hpz_partition_size);
  CHECK(c.zero.quantized_weights == defaults.quantized_weights);
  CHECK(c.zero.quantized_gradients == defaults.quantized_gradients);
  CHECK(c.zero.mics_shard_size == defaults.mics_shard_size);
  CHECK(c.zero.mics_hierarchical_params_gather == defaults.mics_hierarchical_params_gather);
  const std::string tail =
      ", which DeepSpeed reads only at ZeRO stage 3: ignored at stage 2, as "
      "DeepSpeed ignores it";
  REQUIRE(notes.size() == 5);
  CHECK(notes[0] == "t.json: /zero_optimization/zero_hpz_partition_size is 8" + tail);
  CHECK(notes[1] == "t.json: /zero_optimization/zero_quantized_weights is true" + tail);
  CHECK(notes[2] == "t.json: /zero_optimization/zero_quantized_gradients is true" + tail);
  CHECK(notes[3] == "t.json: /zero_optimization/mics_shard_size is 4" + tail);
  CHECK(notes[4] ==
        "t.json: /zero_optimization/mics_hierarchical_params_gather is true, which "
        "DeepSpeed reads only at ZeRO stage 3 with MiCS: ignored at stage 2, as "
        "DeepSpeed ignores it");
  // One path for every stage-3-only key: offload_param's note comes first, in the same words.
  notes.clear();
  parse(
      zero(
          {{"stage", 1}, {"offload_param", {{"device", "cpu"}}}, {"zero_quantized_weights", true}}),
      context);
  REQUIRE(notes.size() == 2);
  CHECK_THAT(notes[0], Contains("/zero_optimization/offload_param/device is \"cpu\", which "
                                "DeepSpeed reads only at ZeRO stage 3: ignored at stage 1"));
  CHECK_THAT(notes[1], Contains("/zero_optimization/zero_quantized_weights is true, which "
                                "DeepSpeed reads only at ZeRO stage 3: ignored at stage 1"));
  // Their off values say nothing.
  notes.clear();
  parse(zero({{"stage", 2},
              {"zero_hpz_partition_size", 1},
              {"zero_quantized_weights", false},
              {"mics_shard_size", -1}}),
        context);
  CHECK(notes.empty());
  // At stage 3 they are read, without a note; the hierarchical gather without a shard is not.
  notes.clear();
  c = parse(zero({{"stage", 3}, {"mics_shard_size", 4}, {"mics_hierarchical_params_gather", true}}),
            context);
  CHECK(c.zero.mics());
  CHECK(c.zero.mics_hierarchical_params_gather);
  CHECK(notes.empty());
  c = parse(zero({{"stage", 3}, {"mics_hierarchical_params_gather", true}}), context);
  CHECK_FALSE(c.zero.mics_hierarchical_params_gather);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] ==
        "t.json: /zero_optimization/mics_hierarchical_params_gather is true, which "
        "DeepSpeed reads only with mics_shard_size > 0: ignored without a MiCS shard, "
        "as DeepSpeed ignores it");
  // What is written back is a plain ZeRO-2 block.
  const json written = ds_config_to_json(parse(stage2))["zero_optimization"];
  for (const auto& item : zpp.items()) CHECK_FALSE(written.contains(item.key()));
}

}  // namespace
}  // namespace zplan::sim
