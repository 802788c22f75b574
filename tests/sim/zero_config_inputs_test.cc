// Issue 16, real users' inputs: what the ds_config reader does with the optimizer block, the
// activation_checkpointing block, bf16 with fp32 accumulation at stage 1, the top-level blocks
// that change the training job, and values DeepSpeed's pydantic classes coerce. Each expectation
// is DeepSpeed 0.19.5's behaviour, checked against its source (named in the reader) and, for the
// pydantic coercions, against its config classes (tools/ds-config-check).
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/sim/zero_config_test_util.h"

namespace zplan::sim::testing {
namespace {

using Catch::Matchers::Contains;

const json kBase = {{"train_micro_batch_size_per_gpu", 1}, {"bf16", {{"enabled", true}}}};

json with(json j, const char* key, json value) {
  j[key] = std::move(value);
  return j;
}

json stage(int s, json zero = json::object()) {
  zero["stage"] = s;
  return with(kBase, "zero_optimization", std::move(zero));
}

json optimizer(json j, const std::string& type, json params = json::object()) {
  j["optimizer"] = {{"type", type}, {"params", std::move(params)}};
  return j;
}

TEST_CASE("lax integers: strings of integers, integral floats, booleans", "[zero_config][inputs]") {
  CHECK(parse(with_zero({{"stage", "3"}})).zero.stage == 3);
  CHECK(parse(with_zero({{"stage", " +2 "}})).zero.stage == 2);
  CHECK(parse(with_zero({{"stage", "3.0"}})).zero.stage == 3);
  CHECK(parse(with_zero({{"stage", true}})).zero.stage == 1);  // pydantic: True -> 1
  CHECK(parse(with_zero({{"stage", 3}, {"stage3_prefetch_bucket_size", "50_000_000"}}))
            .zero.prefetch_bucket_size == 50'000'000);
  CHECK(parse(with_zero({{"stage", 3}, {"zero_hpz_partition_size", "8"}}))
            .zero.hpz_partition_size == 8);
  CHECK(parse(with_zero({{"stage", 3}, {"mics_shard_size", "-1"}})).zero.mics_shard_size == -1);
  // What pydantic refuses stays refused: exponents, fractions, underscores not between digits.
  const std::string z = "t.json: /zero_optimization/";
  for (const char* bad : {"5e8", "1.5", "1.", "_1", "1__0", "0x10", "", "eight"}) {
    INFO(bad);
    CHECK_THAT(error_of(with_zero({{"reduce_bucket_size", bad}})),
               Contains(z + "reduce_bucket_size: must be an integer"));
  }
  CHECK_THAT(error_of(with_zero({{"stage", "4"}})), Contains(z + "stage: must be a ZeRO stage"));
}

TEST_CASE("lax booleans: 0/1 and pydantic's strings, in any case", "[zero_config][inputs]") {
  for (const json& yes : {json("yes"), json("True"), json("ON"), json("1"), json("t"), json("y"),
                          json(1), json(1.0)}) {
    INFO(yes.dump());
    CHECK(parse(with_zero({{"stage", 3}, {"zero_quantized_weights", yes}}))
              .zero.quantized_weights);
  }
  for (const json& no : {json("no"), json("False"), json("OFF"), json("0"), json("f"), json("n"),
                         json(0)}) {
    INFO(no.dump());
    CHECK_FALSE(parse(with_zero({{"stage", 3}, {"overlap_comm", no}})).zero.overlap_comm);
  }
  // Not stripped, and no other number or word.
  for (const json& bad : {json(" yes"), json("1.0"), json("00"), json(2), json(0.5)}) {
    INFO(bad.dump());
    CHECK_THAT(error_of(with_zero({{"overlap_comm", bad}})), Contains("must be true or false"));
  }
  // The precision blocks are pydantic models too.
  CHECK(parse(with(kBase, "bf16", {{"enabled", "yes"}})).precision == Precision::kBf16);
  // Passed-through booleans are kept as what DeepSpeed reads.
  CHECK(parse(with_zero({{"stage", 3}, {"stage3_gather_16bit_weights_on_model_save", "true"}}))
            .zero.other["stage3_gather_16bit_weights_on_model_save"] == true);
}

TEST_CASE("lax floats: numeric strings (Python's float syntax), booleans", "[zero_config][inputs]") {
  auto ratio = [](json r) {
    return with_zero({{"stage", 3}, {"offload_optimizer", {{"device", "cpu"}, {"ratio", r}}}});
  };
  CHECK(parse(ratio(" 0.5")).zero.offload_optimizer.ratio == 0.5);
  CHECK(parse(ratio(".25")).zero.offload_optimizer.ratio == 0.25);
  CHECK(parse(ratio("5e-1")).zero.offload_optimizer.ratio == 0.5);
  CHECK(parse(ratio(true)).zero.offload_optimizer.ratio == 1.0);
  CHECK_THAT(error_of(ratio("half")), Contains("offload_optimizer/ratio: must be a number"));
  CHECK_THAT(error_of(ratio("1e")), Contains("offload_optimizer/ratio: must be a number"));
  CHECK_THAT(error_of(ratio("nan")), Contains("offload_optimizer/ratio: must be a finite number"));
}

TEST_CASE("the trial's typed files are read as DeepSpeed reads them (defect 13)",
          "[zero_config][inputs]") {
  // tests/fixtures/trial/defect13_*.json copy the trial's inputs; on 512 GPUs, as the trial ran.
  ParseContext c512 = context8();
  c512.dp_world_size = 512;
  auto read = [&](const char* name) {
    return load_ds_config(std::string(ZPLAN_SOURCE_DIR) + "/tests/fixtures/trial/" + name,
                          c512);
  };
  CHECK(read("defect13_stage_str.json").zero.stage == 3);
  CHECK(read("defect13_hpz_str.json").zero.hpz_partition_size == 8);
  CHECK(read("defect13_mics_str.json").zero.mics_shard_size == 16);
  CHECK(read("defect13_qw_str.json").zero.quantized_weights);
  const DsConfig h = read("defect13_mics_h_int.json");
  CHECK(h.zero.mics_shard_size == 16);
  CHECK(h.zero.mics_hierarchical_params_gather);
}

TEST_CASE("plain-dict blocks keep JSON types, activation flags are tested as Python does",
          "[zero_config][inputs]") {
  std::vector<std::string> notes;
  ParseContext context = context8();
  context.notes = &notes;
  // checkpointing.py tests the flags with `if`: the string "false" is true there.
  const DsConfig c = parse(
      with(kBase, "activation_checkpointing", {{"cpu_checkpointing", "false"}, {"profile", 0}}),
      context);
  CHECK(c.activation_checkpointing.cpu_checkpointing);
  CHECK_FALSE(c.activation_checkpointing.profile);
  REQUIRE(notes.size() == 2);
  CHECK_THAT(notes[0], Contains("/activation_checkpointing/cpu_checkpointing is \"false\", which "
                                "DeepSpeed tests as Python does: true"));
  CHECK_THAT(notes[1], Contains("/activation_checkpointing/profile is 0, which DeepSpeed tests as "
                                "Python does: false"));
  // get_scalar_param keys at the top level are not coerced: DeepSpeed's arithmetic fails on them.
  CHECK_THAT(error_of(with(kBase, "gradient_clipping", "1.0")), Contains("/gradient_clipping"));
  CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", "1"}}),
             Contains("/train_micro_batch_size_per_gpu"));
}

TEST_CASE("activation_checkpointing: unknown keys are ignored, with a note (defect 2)",
          "[zero_config][inputs]") {
  std::vector<std::string> notes;
  ParseContext context = context8();
  context.notes = &notes;
  const DsConfig c = parse(with(kBase, "activation_checkpointing", {{"cpu_checkpoint", true}}),
                           context);
  // DeepSpeedActivationCheckpointingConfig reads its six keys only: the typo changes nothing.
  CHECK_FALSE(c.activation_checkpointing.cpu_checkpointing);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "t.json: /activation_checkpointing/cpu_checkpoint is not a key DeepSpeed's "
                    "activation-checkpointing config reads: ignored, as DeepSpeed ignores it; did "
                    "you mean \"cpu_checkpointing\"?");
  // It is kept for writing back, as the rest of the block.
  CHECK(ds_config_to_json(c)["activation_checkpointing"]["cpu_checkpoint"] == true);
  // null is get_scalar_param's None: the default (false), no note.
  notes.clear();
  CHECK_FALSE(parse(with(kBase, "activation_checkpointing", {{"number_checkpoints", nullptr},
                                                             {"profile", nullptr}}),
                    context)
                  .activation_checkpointing.profile);
  CHECK(notes.empty());
  // number_checkpoints false (DeepSpeed's docs' template, copied into real configs) is Python's
  // 0, which DeepSpeed never checks: as if not given, with a note; true stays an error.
  const DsConfig no_count = parse(with(kBase, "activation_checkpointing",
                                       {{"partition_activations", false},
                                        {"number_checkpoints", false}}),
                                  context);
  CHECK_FALSE(no_count.activation_checkpointing.number_checkpoints.has_value());
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Contains("/activation_checkpointing/number_checkpoints is false: read as "
                                "not given"));
  CHECK_FALSE(ds_config_to_json(no_count)["activation_checkpointing"].contains(
      "number_checkpoints"));
  CHECK_THAT(error_of(with(kBase, "activation_checkpointing", {{"number_checkpoints", true}})),
             Contains("/activation_checkpointing/number_checkpoints"));
}

TEST_CASE("a top-level key DeepSpeed never reads is ignored, with a note and the nearest key",
          "[zero_config][inputs]") {
  std::vector<std::string> notes;
  ParseContext context = context8();
  context.notes = &notes;
  // A misspelt block: DeepSpeed runs the file without it (stage 0 here), and so does zplan.
  const DsConfig c = parse(with(kBase, "zero_optimisation", {{"stage", 3}}), context);
  CHECK(c.zero.stage != 3);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "t.json: /zero_optimisation is not a key DeepSpeed reads: ignored, as "
                    "DeepSpeed ignores it; did you mean \"zero_optimization\"?");
  // Kept for writing back, as DeepSpeed's own keys zplan does not model are.
  CHECK(ds_config_to_json(c)["zero_optimisation"]["stage"] == 3);
  // Keys DeepSpeed reads elsewhere (monitors, checkpointing) get no note.
  notes.clear();
  parse(with(with(kBase, "wandb", {{"enabled", false}}), "checkpoint", json::object()), context);
  CHECK(notes.empty());
}

TEST_CASE("a top-level block written inside zero_optimization is named as one",
          "[zero_config][inputs]") {
  CHECK(error_of(with_zero({{"stage", 3}, {"aio", {{"block_size", 1048576}}}})) ==
        "t.json: /zero_optimization/aio: unknown key (DeepSpeed 0.19's DeepSpeedZeroConfig "
        "(zero_optimization) does not accept it); it is a top-level key of the ds_config, not "
        "one of this block's");
  // A near miss of the block's own keys keeps its suggestion.
  CHECK_THAT(error_of(with_zero({{"stage", 3}, {"overlap_com", true}})),
             Contains("did you mean \"overlap_comm\"?"));
}

TEST_CASE("the optimizer block sets the optimizer states (defect 1)", "[zero_config][inputs]") {
  struct Case {
    const char* type;
    json params;
    int states;
    const char* name;
  };
  const Case cases[] = {
      {"AdamW", json::object(), 2, "FusedAdam"},
      {"adam", json::object(), 2, "FusedAdam"},
      {"Adam", {{"torch_adam", true}}, 2, "torch.optim.AdamW"},  // adam_w_mode defaults true
      {"Adam", {{"torch_adam", true}, {"adam_w_mode", false}}, 2, "torch.optim.Adam"},
      {"Lion", json::object(), 1, "FusedLion"},
      {"Adagrad", json::object(), 1, "torch.optim.Adagrad"},
  };
  for (const Case& k : cases) {
    INFO(k.type << " " << k.params.dump());
    const DsConfig c = parse(optimizer(stage(2), k.type, k.params));
    CHECK(c.optimizer.states == k.states);
    CHECK(c.optimizer.name == k.name);
    CHECK(c.optimizer.from_file);
    // The block is written back as the file gave it.
    CHECK(ds_config_to_json(c)["optimizer"]["type"] == k.type);
  }
  // No block, or no "type": the script's optimizer, assumed AdamW.
  CHECK(parse(stage(2)).optimizer.is_adam());
  CHECK_FALSE(parse(stage(2)).optimizer.from_file);
  CHECK(parse(with(stage(2), "optimizer", {{"params", {{"lr", 1}}}})).optimizer.is_adam());
  // Under offload DeepSpeed builds its CPU optimizers.
  const json offload = stage(2, {{"offload_optimizer", {{"device", "cpu"}}}});
  CHECK(parse(optimizer(offload, "Lion")).optimizer.cpu == CpuOptimizer::kLion);
  CHECK(parse(optimizer(offload, "Adagrad")).optimizer.cpu_name == "DeepSpeedCPUAdagrad");
  CHECK(parse(optimizer(offload, "AdamW")).optimizer.cpu == CpuOptimizer::kAdam);
}

TEST_CASE("torch_adam updates on torch's foreach path unless the block asks for fused",
          "[zero_config][inputs]") {
  struct Case {
    const char* type;
    json params;
    GpuStep step;
    bool decay;
  };
  const Case cases[] = {
      {"AdamW", json::object(), GpuStep::kFused, false},  // FusedAdam
      // torch.optim.AdamW's weight_decay defaults to 0.01, torch.optim.Adam's to 0.
      {"AdamW", {{"torch_adam", true}}, GpuStep::kForeach, true},
      {"AdamW", {{"torch_adam", true}, {"weight_decay", 0.0}}, GpuStep::kForeach, false},
      {"AdamW", {{"torch_adam", true}, {"weight_decay", "auto"}}, GpuStep::kForeach, false},
      {"Adam", {{"torch_adam", true}, {"adam_w_mode", false}}, GpuStep::kForeach, false},
      {"Adam", {{"torch_adam", true}, {"adam_w_mode", false}, {"weight_decay", 0.1}},
       GpuStep::kForeach, true},
      // fused=True goes to the constructor: torch's one-kernel update.
      {"AdamW", {{"torch_adam", true}, {"fused", true}}, GpuStep::kFused, false},
  };
  for (const Case& k : cases) {
    INFO(k.type << " " << k.params.dump());
    const OptimizerConfig o = parse(optimizer(stage(2), k.type, k.params)).optimizer;
    CHECK(o.gpu_step == k.step);
    CHECK(o.weight_decay_pass == k.decay);
  }
  // fp32 Adam's passes: FusedAdam reads 16 and writes 12 bytes an element; the foreach path
  // makes eight passes (seven without weight decay), and holds a 4-byte denominator.
  OptimizerConfig o;
  CHECK(o.gpu_step_bytes() == 28);
  CHECK(o.gpu_step_transient_bytes() == 0);
  o.gpu_step = GpuStep::kForeach;
  CHECK(o.gpu_step_bytes() == 72);
  CHECK(o.gpu_step_transient_bytes() == 4);
  o.weight_decay_pass = true;
  CHECK(o.gpu_step_bytes() == 80);
}

TEST_CASE("optimizers ZeRO does not test need zero_allow_untested_optimizer",
          "[zero_config][inputs]") {
  // _do_optimizer_sanity_check: torch.optim.SGD is not in ZERO_SUPPORTED_OPTIMIZERS.
  CHECK_THAT(error_of(optimizer(stage(2), "SGD", {{"lr", 0.1}, {"momentum", 0.9}})),
             Contains("t.json: /optimizer/type: You are using an untested ZeRO Optimizer "
                      "(torch.optim.SGD). Please add <\"zero_allow_untested_optimizer\": true>"));
  const json allowed = with(stage(2), "zero_allow_untested_optimizer", true);
  CHECK(parse(optimizer(allowed, "SGD", {{"momentum", 0.9}})).optimizer.states == 1);
  CHECK(parse(optimizer(allowed, "SGD", {{"lr", 0.1}})).optimizer.states == 0);
  CHECK(parse(optimizer(allowed, "RMSprop", {{"momentum", 0.9}, {"centered", true}}))
            .optimizer.states == 3);
  CHECK(parse(optimizer(allowed, "Lamb")).optimizer.states == 2);
  // Without ZeRO there is no such check.
  CHECK(parse(optimizer(stage(0), "SGD")).optimizer.states == 0);
}

TEST_CASE("optimizer blocks DeepSpeed refuses, and those zplan does not model",
          "[zero_config][inputs]") {
  const std::string at = "t.json: /optimizer/type: ";
  CHECK_THAT(error_of(optimizer(stage(2), "OneBitAdam", {{"freeze_step", 100}})),
             Contains(at + "1bit-Adam is not compatible with ZeRO (DeepSpeed asserts it)"));
  CHECK_THAT(error_of(optimizer(stage(1), "ZeroOneAdam")),
             Contains(at + "0/1 Adam is not compatible with ZeRO"));
  CHECK_THAT(error_of(optimizer(stage(0), "OneBitLamb")), Contains(at + "not modelled: 1bit-Lamb"));
  CHECK_THAT(error_of(optimizer(stage(2), "Foo")),
             Contains(at + "\"Foo\" is not a supported DeepSpeed Optimizer"));
  CHECK_THAT(error_of(optimizer(stage(2), "sgd")),
             Contains(at + "torch.optim.sgd is a module, not an optimizer class"));
  CHECK_THAT(error_of(optimizer(stage(2), "Muon")), Contains(at + "not modelled: Muon"));
  CHECK_THAT(error_of(optimizer(stage(0), "LBFGS")), Contains(at + "not modelled: torch.optim.LBFGS"));
  {
    // DeepSpeed raises only when it builds the optimizer from the block, which
    // Megatron-DeepSpeed's configs carry while passing their own optimizer: a note.
    std::vector<std::string> notes;
    ParseContext context = context8();
    context.notes = &notes;
    CHECK(parse(optimizer(stage(2), "Adam", {{"max_grad_norm", 1.0}}), context).optimizer.is_adam());
    REQUIRE(notes.size() == 1);
    CHECK_THAT(notes[0], Contains("t.json: /optimizer/params/max_grad_norm: DeepSpeed raises "
                                  "ValueError (\"'max_grad_norm' is not supported"));
  }
  {
    // No optimizer block under offload: the script's optimizer. DeepSpeedCPUAdam unless
    // zero_force_ds_cpu_optimizer is false (Accelerate swaps a torch one in; DeepSpeed refuses
    // others), when the script's own steps on the host: a note then only.
    const json offload3 = stage(3, {{"offload_optimizer", {{"device", "cpu"}}}});
    for (const json& force : {json(false), json(0), json(true), json(nullptr)}) {
      INFO(force.dump());
      std::vector<std::string> notes;
      ParseContext context = context8();
      context.notes = &notes;
      json file = force.is_null() ? offload3 : with(offload3, "zero_force_ds_cpu_optimizer", force);
      CHECK(parse(file, context).optimizer.is_adam());
      const bool kept = force == json(false) || force == json(0);
      REQUIRE(notes.size() == (kept ? 1u : 0u));
      if (kept) {
        CHECK_THAT(notes[0], Contains("t.json: /zero_force_ds_cpu_optimizer: false with optimizer "
                                      "offload and no \"optimizer\" block"));
      }
    }
  }
  CHECK_THAT(error_of(with(stage(2), "optimizer", {{"type", 3}})),
             Contains(at + "must be an optimizer name"));
  CHECK(error_of(with(stage(2), "optimizer", {{"type", "AdamW"}, {"params", {1}}})) ==
        "t.json: /optimizer/params: must be an object, got an array");
  // A null "params" is torch's defaults, as no "params".
  CHECK(parse(with(stage(2), "optimizer", {{"type", "AdamW"}, {"params", nullptr}}))
            .optimizer.is_adam());
  // torch_adam under offload steps torch.optim.AdamW on the CPU, which zplan does not time.
  const json offload = stage(2, {{"offload_optimizer", {{"device", "cpu"}}}});
  CHECK_THAT(error_of(optimizer(offload, "AdamW", {{"lr", 1e-4}, {"torch_adam", true}})),
             Contains(at + "not modelled: torch.optim.AdamW stepping on the CPU under optimizer "
                           "offload"));
  CHECK_THAT(error_of(optimizer(with(offload, "zero_allow_untested_optimizer", true), "SGD")),
             Contains(at + "not modelled: torch.optim.SGD stepping on the CPU"));
}

TEST_CASE("bf16 with fp32 accumulation at stage 1 is BF16_Optimizer, with a note (defect 3)",
          "[zero_config][inputs]") {
  std::vector<std::string> notes;
  ParseContext context = context8();
  context.notes = &notes;
  const json fp32acc = with(stage(1), "data_types", {{"grad_accum_dtype", "fp32"}});
  const DsConfig c = parse(fp32acc, context);
  CHECK(uses_bf16_optimizer(c));
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Contains("/data_types/grad_accum_dtype is fp32 with bf16 at ZeRO stage 1: "
                                "DeepSpeed runs BF16_Optimizer"));
  // engine.py _do_optimizer_sanity_check: not with offload, not at stage 2, not with bf16
  // accumulation, not in fp16.
  CHECK_FALSE(uses_bf16_optimizer(
      parse(with(stage(1, {{"offload_optimizer", {{"device", "cpu"}}}}), "data_types",
                 {{"grad_accum_dtype", "fp32"}}))));
  CHECK_FALSE(uses_bf16_optimizer(parse(with(stage(2), "data_types", {{"grad_accum_dtype", "fp32"}}))));
  CHECK_FALSE(uses_bf16_optimizer(parse(stage(1))));
  json fp16 = with(fp32acc, "fp16", {{"enabled", true}});
  fp16.erase("bf16");
  CHECK_FALSE(uses_bf16_optimizer(parse(fp16)));
}

TEST_CASE("top-level blocks that change the job are refused when enabled (defect 4)",
          "[zero_config][inputs]") {
  const json base = stage(2);
  CHECK_THAT(error_of(with(base, "hybrid_engine", {{"enabled", true}})),
             Contains("t.json: /hybrid_engine/enabled: not modelled: DeepSpeed's hybrid engine"));
  CHECK_THAT(error_of(with(base, "hybrid_engine", {{"enabled", false}, {"max_tokens", 1}})),
             Contains("t.json: /hybrid_engine/max_tokens: unknown key"));
  CHECK_THAT(error_of(with(base, "torch_autocast", {{"enabled", true}, {"dtype", "bfloat16"}})),
             Contains("t.json: /torch_autocast/enabled: not modelled: torch autocast"));
  CHECK_THAT(
      error_of(with(stage(3, {{"zero_quantized_weights", true}}), "torch_autocast",
                    {{"enabled", true}})),
      Contains("t.json: /torch_autocast/enabled: Cannot enable both torch autocast and zero "
               "quantized weights (DeepSpeed asserts it"));
  CHECK_THAT(error_of(with(base, "progressive_layer_drop", {{"enabled", true}, {"theta", 0.5}})),
             Contains("t.json: /progressive_layer_drop/enabled: not modelled: progressive layer "
                      "drop"));
  // get_scalar_param + `if`: the string "false" switches it on.
  CHECK_THAT(error_of(with(base, "progressive_layer_drop", {{"enabled", "false"}})),
             Contains("(\"false\" is true to DeepSpeed"));
  CHECK_THAT(
      error_of(with(base, "data_efficiency",
                    {{"enabled", true},
                     {"data_routing", {{"enabled", true}, {"random_ltd", {{"enabled", true}}}}}})),
      Contains("t.json: /data_efficiency/data_routing/random_ltd/enabled: not modelled: "
               "random-LTD"));
  CHECK_THAT(error_of(with(base, "data_efficiency",
                           {{"data_sampling",
                             {{"curriculum_learning",
                               {{"enabled", true}, {"curriculum_metrics", json::object()}}}}}})),
             Contains("/curriculum_learning/enabled: not modelled: curriculum learning"));
  CHECK_THAT(error_of(with(base, "data_efficiency",
                           {{"data_sampling", {{"curriculum_learning", {{"enabled", true}}}}}})),
             Contains("Curriculum learning is enabled, curriculum_metrics must be specified"));
  CHECK_THAT(error_of(with(base, "data_efficiency",
                           {{"data_sampling", {{"dynamic_batching", {{"enabled", true}}}}}})),
             Contains("/dynamic_batching/enabled: not modelled: dynamic batching"));
  CHECK_THAT(error_of(with(base, "curriculum_learning",
                           {{"enabled", true}, {"curriculum_type", "seqlen"}})),
             Contains("t.json: /curriculum_learning/enabled: not modelled: curriculum learning"));
  // AutoEP (module_inject/auto_ep_config.py parse_autoep_config: a plain dict).
  CHECK_THAT(error_of(with(base, "expert_parallel",
                           {{"enabled", true}, {"autoep_size", 8}, {"preset_model", "mixtral"}})),
             Contains("t.json: /expert_parallel/enabled: not modelled: AutoEP expert "
                      "parallelism"));
  CHECK_NOTHROW(parse(with(base, "expert_parallel", {{"enabled", false}, {"autoep_size", 8}})));
  CHECK_NOTHROW(parse(with(base, "expert_parallel", nullptr)));
  CHECK_THAT(error_of(with(base, "pipeline", {{"stages", "auto"}})),
             Contains("t.json: /pipeline: not modelled: pipeline parallelism"));
  // Disabled blocks are accepted and kept.
  const DsConfig off = parse(with(
      with(with(with(with(base, "hybrid_engine", {{"enabled", false}}), "torch_autocast",
                     {{"enabled", false}}),
                "progressive_layer_drop", {{"enabled", false}}),
           "curriculum_learning", {{"enabled", false}}),
      "data_efficiency",
      {{"enabled", false},
       {"data_routing", {{"random_ltd", {{"enabled", false}}}}},
       {"data_sampling", {{"curriculum_learning", {{"enabled", false}}}}}}));
  CHECK(ds_config_to_json(off)["progressive_layer_drop"]["enabled"] == false);
  // Several at once: one line each.
  const std::string e = error_of(with(with(base, "hybrid_engine", {{"enabled", true}}),
                                      "progressive_layer_drop", {{"enabled", true}}));
  CHECK(std::count(e.begin(), e.end(), '\n') == 1);
}

}  // namespace
}  // namespace zplan::sim::testing
