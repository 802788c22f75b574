// A mixture of experts under ZeRO-3: zero_optimization.leaf_module as DeepSpeed 0.19 reads it,
// which MoE blocks it makes leaves (deepspeed/utils/z3_leaf_module.py), and what a leaf changes:
// one gather of the whole block instead of one per expert Linear (sim/zero_sizes.cc), and with
// it the stage-3 hooks a step pays on the host.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "hardware/profile.h"
#include "models/catalog.h"
#include "sim/memory_model.h"
#include "sim/simulate.h"
#include "tests/sim/zero_config_test_util.h"

namespace zplan::sim {
namespace {

using Catch::Matchers::Contains;
using nlohmann::json;
using namespace testing;

using Names = std::vector<std::string>;

// transformers 4.x's layout (a module per expert Linear) unless `transformers` says 5.
models::Model mixtral(int transformers = 4) {
  return models::load_model(
      std::string(ZPLAN_SOURCE_DIR) + "/examples/hf/Mixtral-8x7B-v0.1.json", transformers);
}

models::Model data_model(const std::string& name) {
  return models::load_model(std::string(ZPLAN_SOURCE_DIR) + "/tests/models/data/" + name);
}

// The index of the first block's module `name` (layers()[1]), -1 if none.
int module_index(const models::Model& model, const std::string& name) {
  const models::Layer& block = model.layers()[1];
  for (size_t i = 0; i < block.modules.size(); ++i) {
    if (block.modules[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

// The first block's MoE modules that stage 3 fetches, and the elements fetched for them.
struct MoeFetches {
  int count = 0;
  double elements = 0;
};

MoeFetches moe_fetches(const models::Model& model, const ZeroSizes& sizes) {
  const models::Layer& block = model.layers()[1];
  MoeFetches f;
  for (size_t i = 0; i < block.modules.size(); ++i) {
    if (!block.modules[i].moe_block) continue;
    f.elements += sizes.module_fetch[1][i];
    f.count += sizes.module_fetch[1][i] > 0;
  }
  return f;
}

TEST_CASE("leaf_module is read as DeepSpeedZeroLeafModuleConfig reads it", "[zero_config]") {
  const json z3 = {{"stage", 3}};
  const LeafModuleConfig defaults;
  CHECK(defaults.classes == default_leaf_module_classes());
  CHECK(defaults.classes.size() == 3);
  CHECK(parse(with_zero(z3)).zero.leaf_module.is_default());
  // null, "auto" and {} keep the defaults; a string is a list of one; repeats are dropped.
  for (const json& v : {json(nullptr), json("auto"), json::object()}) {
    CHECK(parse(with_zero(merged(z3, {{"leaf_module", v}}))).zero.leaf_module.is_default());
  }
  DsConfig c = parse(with_zero(merged(
      z3, {{"leaf_module",
            {{"classes", "MixtralSparseMoeBlock"}, {"names", {"a", "b", "a"}}}}})));
  CHECK(c.zero.leaf_module.classes == Names{"MixtralSparseMoeBlock"});
  CHECK(c.zero.leaf_module.names == Names{"a", "b"});
  CHECK(c.zero.leaf_module.name_suffixes.empty());
  c = parse(with_zero(merged(z3, {{"leaf_module", {{"classes", json::array()}}}})));
  CHECK(c.zero.leaf_module.classes.empty());
  // Written back only when it is not DeepSpeed's default (DeepSpeed < 0.18 has no such key).
  CHECK(ds_config_to_json(c)["zero_optimization"]["leaf_module"] ==
        json{{"classes", json::array()}});
  CHECK_FALSE(ds_config_to_json(parse(with_zero(z3)))["zero_optimization"].contains(
      "leaf_module"));
  check_round_trip(c);

  const std::string z = "t.json: /zero_optimization/leaf_module";
  CHECK_THAT(error_of(with_zero(merged(z3, {{"leaf_module", {{"classes", {1}}}}}))),
             Contains(z + "/classes/0: must be a string"));
  CHECK_THAT(error_of(with_zero(merged(z3, {{"leaf_module", {{"classes", nullptr}}}}))),
             Contains(z + "/classes: must be a list of names or one name, got null"));
  CHECK_THAT(error_of(with_zero(merged(z3, {{"leaf_module", {{"classez", json::array()}}}}))),
             Contains(z + "/classez"));
  CHECK_THAT(error_of(with_zero(merged(z3, {{"leaf_module", "x"}}))), Contains(z));
}

TEST_CASE("which MoE blocks DeepSpeed 0.19 makes ZeRO-3 leaves", "[sim]") {
  const models::Model model = mixtral();
  const models::ModelShape& m = model.shape();
  CHECK(m.moe_block_class == "transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock");
  CHECK(m.moe_block_name == "block_sparse_moe");
  LeafModuleConfig leaf;
  CHECK(moe_block_is_leaf(m, 0, leaf));  // a default class
  leaf.classes = {};
  CHECK_FALSE(moe_block_is_leaf(m, 0, leaf));
  leaf.classes = {"MixtralSparseMoeBlock"};  // __class__.__name__ matches too
  CHECK(moe_block_is_leaf(m, 31, leaf));
  leaf.classes = {};
  leaf.names = {"model.layers.3.block_sparse_moe"};
  CHECK(moe_block_is_leaf(m, 3, leaf));
  CHECK_FALSE(moe_block_is_leaf(m, 4, leaf));
  leaf.names = {};
  leaf.name_suffixes = {"block_sparse_moe"};
  CHECK(moe_block_is_leaf(m, 4, leaf));
  // DeepSeek-V2's DeepseekV2Moe is not among the default classes; dense models have no block.
  const models::ModelShape ds = data_model("DeepSeek-V2-Lite.json").shape();
  CHECK(ds.moe_block_class == "transformers.models.deepseek_v2.modeling_deepseek_v2.DeepseekV2Moe");
  CHECK_FALSE(moe_block_is_leaf(ds, 1, LeafModuleConfig{}));
  CHECK(moe_block_is_leaf(ds, 1, LeafModuleConfig{{"DeepseekV2Moe"}, {}, {}}));
  CHECK_FALSE(moe_block_is_leaf(models::load_model("llama3-8b").shape(), 0, LeafModuleConfig{}));
}

TEST_CASE("a leaf MoE block is one stage-3 gather, otherwise each expert Linear is one",
          "[sim]") {
  const models::Model model = mixtral();
  const int64_t h = 4096, f = 14336;
  DsConfig c = built(3);
  const ZeroSizes leaf = zero_sizes(model, 32, c);
  c.zero.leaf_module.classes = {};
  const ZeroSizes each = zero_sizes(model, 32, c);
  // layers()[1] is the first block: q, k, v, o, then the router and 8 x 3 expert Linears (the
  // norms are persistent, as is the 8 x 4096 router, below the 1e5 persistence threshold).
  const int router = module_index(model, "layers.0.block_sparse_moe.gate");
  REQUIRE(router >= 0);
  const MoeFetches leaf_fetches = moe_fetches(model, leaf);
  const MoeFetches each_fetches = moe_fetches(model, each);
  CHECK(leaf_fetches.count == 1);
  CHECK(leaf.module_fetch[1][router] == Approx(8.0 * 3 * h * f));
  CHECK(leaf.module_fetch_tensors[1][router] == 24);
  CHECK(each_fetches.count == 24);
  CHECK(each.module_fetch[1][router] == 0);  // persistent, and not a leaf's first module
  CHECK(each_fetches.elements == Approx(leaf_fetches.elements));
  // The largest gather: the whole block, or the embedding (32000 x 4096) above one expert's.
  CHECK(leaf.largest_fetch == Approx(8.0 * 3 * h * f));
  CHECK(each.largest_fetch == Approx(32000.0 * h));
  // DeepSpeed's estimator counts each module's own parameters (stage3.py model_to_params):
  // the experts' Linears are modules of their own, so the largest is the embedding.
  CHECK(model.largest_module_params() == 32000LL * h);
}

TEST_CASE("transformers 5's experts are one module: one gather, leaf or not, and no hang note",
          "[sim]") {
  const models::Model model = mixtral(5);
  const int64_t h = 4096, f = 14336;
  CHECK(model.shape().moe_block_name == "mlp");
  DsConfig c = built(3);
  const ZeroSizes leaf = zero_sizes(model, 32, c);
  c.zero.leaf_module.classes = {};
  const ZeroSizes each = zero_sizes(model, 32, c);
  const int experts = module_index(model, "layers.0.mlp.experts");
  REQUIRE(experts >= 0);
  // The router (8 x 4096) is persistent either way; the experts' two 3D tensors are one fetch.
  CHECK(moe_fetches(model, leaf).count == 1);
  CHECK(moe_fetches(model, each).count == 1);
  CHECK(each.module_fetch[1][experts] == Approx(8.0 * 3 * h * f));
  CHECK(each.module_fetch_tensors[1][experts] == 2);
  CHECK(each.largest_fetch == Approx(8.0 * 3 * h * f));
  CHECK(model.largest_module_params() == 8LL * 3 * h * f);
  // Gathers are the same on every rank whichever experts its tokens reach: no note.
  CHECK(moe_leaf_note(model, c.zero, "ds.json").empty());
  CHECK_FALSE(moe_leaf_note(mixtral(4), c.zero, "ds.json").empty());
}

TEST_CASE("without a leaf, stage 3 hooks every expert Linear: more host time a step", "[sim]") {
  models::Model model = mixtral();
  hardware::Profile p = hardware::load_profile("h100");
  const hardware::Cluster cluster = hardware::make_cluster(p, 32, 4);
  ParseContext ctx;
  ctx.dp_world_size = 32;
  ctx.hidden_size = 4096;
  auto run = [&](const json& zero) {
    const DsConfig c = parse_ds_config(
        json{{"train_micro_batch_size_per_gpu", 1}, {"bf16", {{"enabled", true}}},
             {"zero_optimization", zero}},
        "t.json", ctx);
    return simulate_step(model, cluster, c, Workload{512, Attention::kSdpa});
  };
  const StepResult leaf = run({{"stage", 3}});
  const StepResult each = run({{"stage", 3}, {"leaf_module", {{"classes", json::array()}}}});
  // About the same bytes gathered (which modules stay gathered from the forward into the
  // backward differs a little), in 24 gathers per block instead of one.
  CHECK(each.wire_bytes == Approx(leaf.wire_bytes).epsilon(0.02));
  CHECK(each.step_time_s > leaf.step_time_s);
  // transformers 5 (grouped_mm over the experts' 3D tensors): the same bytes gathered, with
  // neither the per-expert hooks nor the per-expert loop's kernels: faster than 4.x's leaf.
  model = mixtral(5);
  const StepResult fused = run({{"stage", 3}});
  CHECK(fused.wire_bytes == Approx(leaf.wire_bytes).epsilon(0.02));
  CHECK(fused.step_time_s < leaf.step_time_s);
}

}  // namespace
}  // namespace zplan::sim
