// Tests of reading and checking ds_config.json (sim/zero_config.h) against DeepSpeed 0.19's own
// rules (reference/deepspeed_internals.md §1); writing and round trips: zero_config_write_test.cc;
// what the Trainer and the launcher fill in: zero_config_trainer_test.cc; the ZeRO++ and MiCS
// keys: zero_config_zeropp_test.cc.
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

TEST_CASE("precision and device names and sizes", "[zero_config]") {
  CHECK(std::string(precision_name(Precision::kFp16)) == "fp16");
  CHECK(std::string(precision_name(Precision::kBf16)) == "bf16");
  CHECK(std::string(precision_name(Precision::kFp32)) == "fp32");
  CHECK(std::string(offload_device_name(OffloadDevice::kNone)) == "none");
  CHECK(std::string(offload_device_name(OffloadDevice::kCpu)) == "cpu");
  CHECK(std::string(offload_device_name(OffloadDevice::kNvme)) == "nvme");
  CHECK(precision_bytes(Precision::kFp16) == 2);
  CHECK(precision_bytes(Precision::kBf16) == 2);
  CHECK(precision_bytes(Precision::kFp32) == 4);
}

TEST_CASE("every default is DeepSpeed 0.19's code default", "[zero_config]") {
  // reference §1.1 (deepspeed/runtime/zero/config.py, offload_config.py). Where the docs
  // disagree the code wins: stage3_prefetch_bucket_size is 5e7 (docs table: 5e8),
  // stage3_param_persistence_threshold 1e5 (docs example: 1e6), sub_group_size 1e9 (docs
  // example: 1e12), overlap_comm true for stage 3 only (docs: false), offload device "none"
  // (docs: cpu), pin_memory true (false before 0.19.5).
  DsConfig c = parse({{"train_micro_batch_size_per_gpu", 1}});
  const ZeroConfig& z = c.zero;
  CHECK(z.stage == 0);
  CHECK(z.contiguous_gradients);
  CHECK(z.reduce_scatter);
  CHECK(z.reduce_bucket_size == 500'000'000);
  CHECK(z.use_multi_rank_bucket_allreduce);
  CHECK(z.allgather_bucket_size == 500'000'000);
  CHECK_FALSE(z.overlap_comm);
  CHECK_FALSE(z.round_robin_gradients);
  CHECK(z.sub_group_size == 1'000'000'000);
  CHECK(z.prefetch_bucket_size == 50'000'000);
  CHECK(z.param_persistence_threshold == 100'000);
  CHECK(z.model_persistence_threshold == std::numeric_limits<int64_t>::max());  // sys.maxsize
  CHECK(z.max_live_parameters == 1'000'000'000);
  CHECK(z.max_reuse_distance == 1'000'000'000);
  CHECK(z.other == json::object());

  const OffloadParamConfig& p = z.offload_param;
  CHECK(p.device == OffloadDevice::kNone);
  CHECK(p.nvme_path.empty());
  CHECK(p.buffer_count == 5);
  CHECK(p.buffer_size == 100'000'000);
  CHECK(p.max_in_cpu == 1'000'000'000);
  CHECK(p.pin_memory);
  const OffloadOptimizerConfig& o = z.offload_optimizer;
  CHECK(o.device == OffloadDevice::kNone);
  CHECK(o.buffer_count == 4);
  CHECK(o.pin_memory);
  CHECK_FALSE(o.pipeline_read);
  CHECK_FALSE(o.pipeline_write);
  CHECK_FALSE(o.fast_init);
  CHECK(o.ratio == 1.0);

  // The defaults inside an offload block given with only its device.
  DsConfig s3 = parse(with_zero({{"stage", 3},
                                 {"offload_param", {{"device", "nvme"}, {"nvme_path", "/n"}}},
                                 {"offload_optimizer", {{"device", "cpu"}}}}));
  CHECK(s3.zero.offload_param.buffer_count == 5);
  CHECK(s3.zero.offload_param.buffer_size == 100'000'000);
  CHECK(s3.zero.offload_param.max_in_cpu == 1'000'000'000);
  CHECK(s3.zero.offload_param.pin_memory);
  CHECK(s3.zero.offload_optimizer.buffer_count == 4);
  CHECK(s3.zero.offload_optimizer.pin_memory);

  // aio (§1.2), activation_checkpointing (§1.5), the rest of the top level (§1.3, §1.4).
  CHECK(c.aio.block_size == 1'048'576);
  CHECK(c.aio.queue_depth == 8);
  CHECK(c.aio.intra_op_parallelism == 1);
  CHECK_FALSE(c.aio.single_submit);
  CHECK(c.aio.overlap_events);
  CHECK_FALSE(c.aio.use_gds);
  CHECK_FALSE(c.activation_checkpointing.enabled);
  CHECK(c.gradient_clipping == 1.0);
  CHECK(c.precision == Precision::kFp32);
  CHECK(c.grad_accum_dtype == Precision::kFp32);
  CHECK(c.other == json::object());

  DsConfig ac =
      parse({{"train_micro_batch_size_per_gpu", 1}, {"activation_checkpointing", json::object()}});
  const ActivationCheckpointingConfig& a = ac.activation_checkpointing;
  CHECK(a.enabled);
  CHECK_FALSE(a.partition_activations);
  CHECK_FALSE(a.cpu_checkpointing);
  CHECK_FALSE(a.contiguous_memory_optimization);
  CHECK_FALSE(a.number_checkpoints.has_value());
  CHECK_FALSE(a.synchronize_checkpoint_boundary);
  CHECK_FALSE(a.profile);
}

TEST_CASE("overlap_comm defaults to true for stage 3 only", "[zero_config]") {
  for (int stage = 0; stage <= 3; ++stage) {
    INFO("stage " << stage);
    CHECK(parse(with_zero({{"stage", stage}})).zero.overlap_comm == (stage == 3));
    CHECK(parse(with_zero({{"stage", stage}, {"overlap_comm", nullptr}})).zero.overlap_comm ==
          (stage == 3));
    CHECK(parse(with_zero({{"stage", stage}, {"overlap_comm", "auto"}})).zero.overlap_comm ==
          (stage == 3));
  }
  CHECK_FALSE(parse(with_zero({{"stage", 3}, {"overlap_comm", false}})).zero.overlap_comm);
  CHECK(parse(with_zero({{"stage", 1}, {"overlap_comm", true}})).zero.overlap_comm);
}

TEST_CASE("stage accepts integers 0-3, also written as 3.0", "[zero_config]") {
  CHECK(parse(with_zero({{"stage", 3.0}})).zero.stage == 3);
  CHECK(parse(with_zero({{"stage", "auto"}})).zero.stage == 2);  // the Trainer's fill
  CHECK(parse(with_zero({{"reduce_bucket_size", 5e8}})).zero.reduce_bucket_size == 500'000'000);
}

TEST_CASE("rejected zero_optimization values name the file and the JSON pointer", "[zero_config]") {
  const std::string z = "t.json: /zero_optimization/";
  SECTION("stage") {
    CHECK_THAT(error_of(with_zero({{"stage", 4}})), Contains(z + "stage: must be a ZeRO stage"));
    CHECK_THAT(error_of(with_zero({{"stage", -1}})), Contains(z + "stage"));
    // pydantic's lax mode reads "3" as 3 (and true as 1): issue 16, zero_config_inputs_test.cc.
    CHECK_THAT(error_of(with_zero({{"stage", "three"}})), Contains(z + "stage: must be an integer"));
    CHECK_THAT(error_of(with_zero({{"stage", "3.5"}})), Contains(z + "stage"));
    CHECK_THAT(error_of(with_zero({{"stage", nullptr}})),
               Contains(z + "stage: must be an integer, got null"));
    CHECK_THAT(error_of(with_zero({{"stage", 2.5}})), Contains(z + "stage"));
  }
  SECTION("sizes: negative or zero") {
    for (const char* key : {"reduce_bucket_size", "allgather_bucket_size", "sub_group_size",
                            "stage3_prefetch_bucket_size"}) {
      INFO(key);
      CHECK_THAT(error_of(with_zero({{"stage", 3}, {key, -1}})),
                 Contains(z + key + ": must not be negative"));
    }
    // DeepSpeed declares them ge=0 and runs 0, except allgather_bucket_size, which divides by
    // zero in the stage 1/2 all-gather.
    CHECK_THAT(error_of(with_zero({{"stage", 3}, {"allgather_bucket_size", 0}})),
               Contains(z + "allgather_bucket_size: must be a positive number of elements"));
    const DsConfig zeros = parse(with_zero({{"stage", 3},
                                            {"reduce_bucket_size", 0},
                                            {"sub_group_size", 0},
                                            {"stage3_prefetch_bucket_size", 0}}));
    CHECK(zeros.zero.reduce_bucket_size == 0);
    CHECK(zeros.zero.sub_group_size == 0);
    CHECK(zeros.zero.prefetch_bucket_size == 0);
  }
  SECTION("thresholds: negative") {
    for (const char* key :
         {"stage3_param_persistence_threshold", "stage3_model_persistence_threshold",
          "stage3_max_live_parameters", "stage3_max_reuse_distance"}) {
      INFO(key);
      CHECK_THAT(error_of(with_zero({{"stage", 3}, {key, -5}})),
                 Contains(z + key + ": must not be negative"));
      CHECK(parse(with_zero({{"stage", 3}, {key, 0}})).zero.stage == 3);
    }
  }
  SECTION("offload_param is read at stage 3 only") {
    for (int stage : {0, 1, 2}) {
      CHECK(parse(with_zero({{"stage", stage}, {"offload_param", {{"device", "cpu"}}}}))
                .zero.offload_param.device == OffloadDevice::kNone);
    }
    CHECK(parse(with_zero({{"stage", 2}, {"offload_param", {{"device", "none"}}}}))
              .zero.offload_param.device == OffloadDevice::kNone);
  }
  SECTION("NVMe optimizer offload needs stage 3; any optimizer offload needs ZeRO") {
    json nvme = {{"device", "nvme"}, {"nvme_path", "/local_nvme"}};
    CHECK_THAT(error_of(with_zero({{"stage", 2}, {"offload_optimizer", nvme}})),
               Contains(z + "offload_optimizer/device: NVMe optimizer offload needs ZeRO stage 3"));
    CHECK_THAT(error_of(with_zero({{"stage", 0}, {"offload_optimizer", {{"device", "cpu"}}}})),
               Contains(z + "offload_optimizer/device: optimizer offload needs ZeRO stage"));
  }
  SECTION("ratio") {
    auto opt = [](double ratio) { return json{{"device", "cpu"}, {"ratio", ratio}}; };
    CHECK_THAT(error_of(with_zero({{"stage", 3}, {"offload_optimizer", opt(1.5)}})),
               Contains(z + "offload_optimizer/ratio: must be between 0 and 1"));
    CHECK_THAT(error_of(with_zero({{"stage", 3}, {"offload_optimizer", opt(-0.1)}})),
               Contains(z + "offload_optimizer/ratio"));
    CHECK_THAT(error_of(with_zero({{"stage", 2}, {"offload_optimizer", opt(0.5)}})),
               Contains(z + "offload_optimizer/ratio: partial offload"));
    // offload_ratio_check runs whatever the device.
    CHECK_THAT(error_of(with_zero(
                   {{"stage", 2}, {"offload_optimizer", {{"device", "none"}, {"ratio", 0.5}}}})),
               Contains(z + "offload_optimizer/ratio"));
    CHECK(parse(with_zero({{"stage", 3}, {"offload_optimizer", opt(0.5)}}))
              .zero.offload_optimizer.ratio == 0.5);
  }
  SECTION("NVMe without nvme_path, buffer counts below 1") {
    CHECK_THAT(error_of(with_zero({{"stage", 3}, {"offload_param", {{"device", "nvme"}}}})),
               Contains(z + "offload_param/nvme_path: is needed"));
    CHECK_THAT(
        error_of(with_zero(
            {{"stage", 3}, {"offload_optimizer", {{"device", "nvme"}, {"nvme_path", nullptr}}}})),
        Contains(z + "offload_optimizer/nvme_path: is needed"));
    CHECK_THAT(error_of(with_zero(
                   {{"stage", 3}, {"offload_param", {{"device", "cpu"}, {"buffer_count", 0}}}})),
               Contains(z + "offload_param/buffer_count: must be at least 1"));
    CHECK_THAT(
        error_of(with_zero(
            {{"stage", 3}, {"offload_optimizer", {{"device", "cpu"}, {"buffer_count", 0}}}})),
        Contains(z + "offload_optimizer/buffer_count: must be at least 1"));
    CHECK_THAT(error_of(with_zero(
                   {{"stage", 3}, {"offload_param", {{"device", "cpu"}, {"buffer_size", -1}}}})),
               Contains(z + "offload_param/buffer_size: must not be negative"));
  }
  SECTION("unknown keys (pydantic extra=\"forbid\"), with a suggestion for near misses") {
    CHECK_THAT(
        error_of(with_zero({{"stage", 2}, {"overlap_com", true}})),
        Contains(z + "overlap_com: unknown key") && Contains("did you mean \"overlap_comm\""));
    CHECK_THAT(error_of(with_zero({{"allgather_size", 5}})), Contains(z + "allgather_size"));
    CHECK_THAT(
        error_of(with_zero({{"stage", 3}, {"offload_param", {{"device", "cpu"}, {"nvme", "/x"}}}})),
        Contains(z + "offload_param/nvme: unknown key"));
    CHECK_THAT(error_of(with_zero(
                   {{"stage", 3}, {"offload_optimizer", {{"device", "cpu"}, {"ratios", 1}}}})),
               Contains(z + "offload_optimizer/ratios: unknown key"));
    // Inside the offload blocks "auto" is dropped too: pydantic 2 builds nested models through
    // DeepSpeedConfigModel.__init__, so "auto" means the default and hides even an unknown key.
    const DsConfig autos = parse(
        with_zero({{"stage", 3},
                   {"offload_param", {{"device", "cpu"}, {"pin_memory", "auto"}, {"foo", "auto"}}},
                   {"offload_optimizer", {{"device", "auto"}, {"buffer_count", "auto"}}}}));
    CHECK(autos.zero.offload_param.device == OffloadDevice::kCpu);
    CHECK(autos.zero.offload_param.pin_memory);
    CHECK(autos.zero.offload_optimizer.device == OffloadDevice::kNone);
  }
  SECTION("wrong types") {
    CHECK_THAT(error_of(with_zero({{"overlap_comm", "maybe"}})),
               Contains(z + "overlap_comm: must be true or false"));
    CHECK_THAT(error_of(with_zero({{"contiguous_gradients", nullptr}})),
               Contains(z + "contiguous_gradients: must be true or false, got null"));
    CHECK_THAT(error_of(with_zero({{"reduce_bucket_size", "5e8"}})),
               Contains(z + "reduce_bucket_size: must be an integer"));
    CHECK_THAT(error_of(with_zero({{"reduce_bucket_size", 5.5}})),
               Contains(z + "reduce_bucket_size"));
    CHECK_THAT(error_of(with_zero({{"stage", 3}, {"offload_param", 5}})),
               Contains(z + "offload_param: must be an object"));
    CHECK_THAT(error_of(with_zero({{"stage", 3}, {"offload_param", {{"device", "gpu"}}}})),
               Contains(z + "offload_param/device: must be \"none\", \"cpu\" or \"nvme\""));
    CHECK_THAT(error_of(with_zero(
                   {{"stage", 3}, {"offload_param", {{"device", "cpu"}, {"nvme_path", 5}}}})),
               Contains(z + "offload_param/nvme_path: must be a string"));
    CHECK_THAT(error_of(with_zero({{"zero_hpz_partition_size", -1}})),
               Contains(z + "zero_hpz_partition_size: must not be negative"));
    CHECK_THAT(error_of(with_zero({{"zenflow", 3}})), Contains(z + "zenflow: must be an object"));
    CHECK_THAT(error_of(with_zero({{"allgather_partitions", 2}})),
               Contains(z + "allgather_partitions"));
    CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", "3"}}),
               Contains("t.json: /zero_optimization: must be an object"));
    CHECK_THAT(error_of({{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", nullptr}}),
               Contains("t.json: /zero_optimization"));
    CHECK_THAT(error_of(json::array()), Contains("t.json: a ds_config must be a JSON object"));
  }
  SECTION("both spellings of one field, legacy_stage1") {
    CHECK_THAT(
        error_of(with_zero(
            {{"stage", 3}, {"stage3_prefetch_bucket_size", 1000}, {"prefetch_bucket_size", 2000}})),
        Contains("is given twice"));
    CHECK_THAT(error_of(with_zero({{"legacy_stage1", true}})),
               Contains(z + "legacy_stage1: the legacy ZeRO stage 1 was removed"));
    CHECK(parse(with_zero({{"legacy_stage1", false}})).zero.other["legacy_stage1"] == false);
  }
}

TEST_CASE("apex amp is refused, not planned as fp16", "[zero_config]") {
  // Apex amp.
  CHECK(error_of({{"train_micro_batch_size_per_gpu", 1}, {"amp", {{"enabled", true}}}}) ==
        "t.json: /amp/enabled: not modelled: apex amp mixed precision (its own master weights "
        "and loss scaling); use \"fp16\" or \"bf16\" to plan DeepSpeed's own mixed precision");
  CHECK_NOTHROW(parse({{"train_micro_batch_size_per_gpu", 1}, {"amp", {{"enabled", false}}}}));
}

TEST_CASE("other rejected top-level values", "[zero_config]") {
  const json base = {{"train_micro_batch_size_per_gpu", 1}};
  auto with = [&](const char* key, json value) {
    json j = base;
    j[key] = std::move(value);
    return j;
  };
  CHECK_THAT(error_of(merged(with("fp16", {{"enabled", true}}), {{"bf16", {{"enabled", true}}}})),
             Contains("t.json: /bf16: bf16 and fp16 cannot both be enabled"));
  CHECK_THAT(
      error_of(merged(with("fp16", {{"enabled", true}}), {{"bfloat16", {{"enabled", true}}}})),
      Contains("t.json: /bfloat16: bf16 and fp16"));
  {
    ParseContext fp16 = context8();
    fp16.auto_precision = Precision::kFp16;
    CHECK_THAT(
        error_of(merged(with("fp16", {{"enabled", "auto"}}), {{"bf16", {{"enabled", true}}}}),
                 fp16),
        Contains("\"enabled\": \"auto\" follows"));
  }
  CHECK_THAT(error_of(with("fp16", {{"enabled", true}, {"loss_scaling", 0}})),
             Contains("t.json: /fp16/loss_scaling: unknown key"));
  CHECK_THAT(error_of(with("bf16", {{"enabled", true}, {"immediate_grad_updates", true}})),
             Contains("t.json: /bf16/immediate_grad_updates: unknown key") &&
                 Contains("did you mean \"immediate_grad_update\""));
  CHECK_THAT(error_of(with("fp16", {{"enabled", "enabled"}})),
             Contains("t.json: /fp16/enabled: must be true or false"));
  CHECK_THAT(error_of(with("fp16", nullptr)), Contains("t.json: /fp16: must be an object"));
  CHECK_THAT(error_of(with("fp16", {{"enabled", true}, {"loss_scale", -1}})),
             Contains("t.json: /fp16/loss_scale: must not be negative"));
  CHECK_THAT(error_of(with("fp16", {{"enabled", true}, {"loss_scale_window", 0}})),
             Contains("t.json: /fp16/loss_scale_window: must be positive with dynamic"));
  CHECK(parse(with("fp16", {{"enabled", true}, {"loss_scale", 128}, {"loss_scale_window", 0}}))
            .precision == Precision::kFp16);
  CHECK_THAT(error_of(with("fp16", {{"fp16_master_weights_and_grads", true}})),
             Contains("t.json: /fp16/fp16_master_weights_and_grads: is only supported with ZeRO"));
  CHECK_THAT(error_of(merged(with_zero({{"stage", 1}}),
                             {{"bf16", {{"enabled", true}, {"bf16_optimizer_states", true}}}})),
             Contains("t.json: /bf16/bf16_optimizer_states: requires"));
  // 16-bit master weights (base_optimizer.py _configure_master_weights): DeepSpeed's offload
  // assertion where it applies, else the bytes of the master, its gradient and the states.
  const json bf16_mw = {{"enabled", true}, {"bf16_master_weights_and_grads", true}};
  const json cpu = {{"device", "cpu"}};
  CHECK_THAT(error_of(merged(with_zero({{"stage", 2}}), {{"bf16", bf16_mw}})),
             Contains("t.json: /bf16/bf16_master_weights_and_grads: Master weights feature "
                      "requires ZeRO Offload with DeepSpeedCPUAdam"));
  {
    const DsConfig c =
        parse(merged(with_zero({{"stage", 3}, {"offload_optimizer", cpu}}), {{"bf16", bf16_mw}}));
    CHECK(c.optimizer.master_bytes() == 2);
    CHECK(c.optimizer.state_elem_bytes() == 4);
    CHECK(c.optimizer.step_bytes() == 3 * 2 + 2 * 8);
    // Written back as read.
    CHECK(ds_config_to_json(c)["bf16"]["bf16_master_weights_and_grads"] == true);
  }
  json bf16_all = bf16_mw;
  bf16_all["bf16_optimizer_states"] = true;
  {
    // bf16 states keep everything on the GPU: no offload needed.
    const DsConfig c = parse(merged(with_zero({{"stage", 3}}), {{"bf16", bf16_all}}));
    CHECK(c.optimizer.master_bytes() == 2);
    CHECK(c.optimizer.state_bytes() == 4);
  }
  CHECK(parse(merged(with_zero({{"stage", 1}, {"offload_optimizer", cpu}}),
                     {{"fp16", {{"enabled", true}, {"fp16_master_weights_and_grads", true}}}}))
            .optimizer.master_bytes() == 2);
  CHECK_THAT(error_of(merged(with_zero({{"stage", 2}, {"offload_optimizer", cpu}}),
                             {{"bf16", bf16_mw},
                              {"optimizer", {{"type", "Lion"}, {"params", {{"lr", 1e-4}}}}}})),
             Contains("requires ZeRO Offload with DeepSpeedCPUAdam (DeepSpeed asserts it, "
                      "_enforce_cpu_offload); the optimizer block builds DeepSpeedCPULion"));
  CHECK_THAT(error_of(merged(with_zero({{"stage", 3},
                                        {"offload_optimizer",
                                         {{"device", "nvme"}, {"nvme_path", "/local_nvme"}}}}),
                             {{"bf16", bf16_mw}})),
             Contains("not modelled: 16-bit master weights swapped to NVMe"));
  CHECK_THAT(error_of(merged(with_zero({{"stage", 1}, {"offload_optimizer", cpu}}),
                             {{"bf16", bf16_mw},
                              {"fp16", {{"enabled", false}, {"fp16_master_weights_and_grads", true}}}})),
             Contains("mutually exclusive"));
  // bf16 states with offload need DeepSpeedCPUAdam(fp32_optimizer_states=False): an AdamW block
  // gets it from the engine; the script's optimizer (Accelerate's DeepSpeedCPUAdam) does not.
  const json adamw = {{"type", "AdamW"}, {"params", {{"lr", 1e-5}}}};
  CHECK_THAT(error_of(merged(with_zero({{"stage", 3}, {"offload_optimizer", cpu}}),
                             {{"bf16", bf16_all}})),
             Contains("t.json: /bf16/bf16_optimizer_states: with ZeRO-Offload requires "
                      "DeepSpeedCPUAdam constructed with fp32_optimizer_states=False"));
  CHECK(parse(merged(with_zero({{"stage", 3}, {"offload_optimizer", cpu}}),
                     {{"bf16", bf16_all}, {"optimizer", adamw}}))
            .optimizer.state_dtype == Precision::kBf16);
  // fp32_optimizer_states is DeepSpeedCPUAdam's: FusedAdam, built without offload, fails on it.
  json adamw_fp32_states = adamw;
  adamw_fp32_states["params"]["fp32_optimizer_states"] = false;
  CHECK_THAT(error_of(merged(with_zero({{"stage", 3}}),
                             {{"bf16", bf16_all}, {"optimizer", adamw_fp32_states}})),
             Contains("t.json: /optimizer/params/fp32_optimizer_states: is a DeepSpeedCPUAdam "
                      "parameter, and this block builds FusedAdam"));
  {
    // With an fp32 master it changes nothing: the states take the dtype of the fp32 master.
    const DsConfig c = parse(merged(with_zero({{"stage", 2}, {"offload_optimizer", cpu}}),
                                    {{"optimizer", adamw_fp32_states}}));
    CHECK(c.optimizer.state_dtype == Precision::kFp32);
    CHECK_FALSE(c.optimizer.cpu_fp32_states);
  }
  // An fp16 master in a bf16 run is fp16, whatever the training dtype.
  CHECK(parse(merged(with_zero({{"stage", 2}, {"offload_optimizer", cpu}}),
                     {{"bf16", {{"enabled", true}}},
                      {"fp16", {{"enabled", false}, {"fp16_master_weights_and_grads", true}}}}))
            .optimizer.master_dtype == Precision::kFp16);
  // Off, or "auto" (the default), is the default mixed precision.
  CHECK(parse(merged(with_zero({{"stage", 2}}),
                     {{"bf16", {{"enabled", true}, {"bf16_master_weights_and_grads", false}}}}))
            .optimizer.master_bytes() == 4);
  CHECK_THAT(error_of(with("activation_checkpointing",
                           {{"contiguous_memory_optimization", true}, {"number_checkpoints", 4}})),
             Contains("t.json: /activation_checkpointing/contiguous_memory_optimization: needs "
                      "partition_activations"));
  // The layer count contiguous checkpoints need may come from checkpointing.configure's
  // num_checkpoints argument (Megatron passes its num_layers), so the file need not give it.
  CHECK(parse(with("activation_checkpointing",
                   {{"contiguous_memory_optimization", true}, {"partition_activations", true}}))
            .activation_checkpointing.contiguous_memory_optimization);
  CHECK_THAT(error_of(with("activation_checkpointing", {{"number_checkpoints", 0}})),
             Contains("t.json: /activation_checkpointing/number_checkpoints: must be positive"));
  CHECK_THAT(error_of(with("activation_checkpointing", nullptr)),
             Contains("t.json: /activation_checkpointing: must be an object"));
  CHECK_THAT(error_of(with("aio", {{"queue_depth", 0}})),
             Contains("t.json: /aio/queue_depth: must be a positive integer"));
  CHECK_THAT(error_of(with("gradient_clipping", -1)),
             Contains("t.json: /gradient_clipping: must be a finite number >= 0"));
  CHECK_THAT(error_of(with("gradient_clipping", "1.0")), Contains("t.json: /gradient_clipping"));
  CHECK_THAT(
      error_of(merged(with_zero({{"stage", 1}}), {{"data_types", {{"grad_accum_dtype", "int8"}}}})),
      Contains("t.json: /data_types/grad_accum_dtype: must be \"fp32\""));
  CHECK_THAT(error_of(with("data_types", nullptr)), Contains("t.json: /data_types"));
  // Without ZeRO DeepSpeed has no optimizer for mixed model / accumulation dtypes.
  CHECK_THAT(error_of(merged(with("bf16", {{"enabled", true}}),
                             {{"data_types", {{"grad_accum_dtype", "fp32"}}}})),
             Contains("t.json: /data_types/grad_accum_dtype: DeepSpeed does not support"));
  CHECK_THAT(error_of(with("communication_data_type", "fp8")),
             Contains("t.json: /communication_data_type: must be"));
}

TEST_CASE("precision blocks and data_types", "[zero_config]") {
  json j = with_zero({{"stage", 2}});
  CHECK(parse(j).precision == Precision::kFp32);
  j["bfloat16"] = {{"enabled", true}};
  DsConfig old_name = parse(j);
  CHECK(old_name.precision == Precision::kBf16);
  CHECK_FALSE(old_name.other.contains("bfloat16"));
  // "bf16" wins over the old name, which DeepSpeed then never reads.
  j["bf16"] = {{"enabled", false}};
  CHECK(parse(j).precision == Precision::kFp32);
  j["data_types"] = {{"grad_accum_dtype", "float32"}, {"param_dtype", "bf16"}};
  j["bf16"] = {{"enabled", true}, {"check_grad_overflow", false}};
  DsConfig c = parse(j);
  CHECK(c.precision == Precision::kBf16);
  CHECK(c.grad_accum_dtype == Precision::kFp32);
  CHECK(c.other["data_types"] == json{{"param_dtype", "bf16"}});
  CHECK(c.other["bf16"] == json{{"check_grad_overflow", false}});
  json written = check_round_trip(c);
  CHECK(written["data_types"]["grad_accum_dtype"] == "fp32");
  CHECK(written["bf16"]["enabled"] == true);
  // fp16 loss-scaling settings stay when fp16 is off ("auto" ones are dropped: defaults).
  json hf = {{"train_micro_batch_size_per_gpu", 1},
             {"fp16", {{"enabled", "auto"}, {"loss_scale", 0}, {"hysteresis", "auto"}}},
             {"bf16", {{"enabled", "auto"}}},
             {"communication_data_type", "BF16"}};
  DsConfig h = parse(hf);
  CHECK(h.precision == Precision::kBf16);
  CHECK(h.other["fp16"] == json{{"loss_scale", 0}});
  CHECK(h.other["communication_data_type"] == "BF16");
  check_round_trip(h);
}

TEST_CASE("deprecated aliases are mapped as DeepSpeed maps them", "[zero_config]") {
  SECTION("cpu_offload -> offload_optimizer cpu (and contiguous gradients in stage 1/2)") {
    DsConfig c =
        parse(with_zero({{"stage", 2}, {"cpu_offload", true}, {"contiguous_gradients", false}}));
    CHECK(c.zero.offload_optimizer.device == OffloadDevice::kCpu);
    CHECK(c.zero.offload_optimizer.pin_memory);
    CHECK(c.zero.contiguous_gradients);
    CHECK(parse(with_zero({{"stage", 2}, {"cpu_offload", false}})).zero.offload_optimizer.device ==
          OffloadDevice::kNone);
    CHECK_THAT(
        error_of(with_zero(
            {{"stage", 2}, {"cpu_offload", false}, {"offload_optimizer", {{"device", "cpu"}}}})),
        Contains("t.json: /zero_optimization/cpu_offload: is the deprecated form"));
    CHECK_THAT(error_of(with_zero({{"stage", 0}, {"cpu_offload", true}})),
               Contains("t.json: /zero_optimization/cpu_offload: optimizer offload needs"));
  }
  SECTION("cpu_offload_param -> offload_param cpu") {
    CHECK(parse(with_zero({{"stage", 3}, {"cpu_offload_param", true}})).zero.offload_param.device ==
          OffloadDevice::kCpu);
    std::vector<std::string> notes;
    ParseContext context = context8();
    context.notes = &notes;
    CHECK(parse(with_zero({{"stage", 2}, {"cpu_offload_param", true}}), context)
              .zero.offload_param.device == OffloadDevice::kNone);
    CHECK_THAT(notes.back(), Contains("t.json: /zero_optimization/cpu_offload_param is \"cpu\", "
                                      "which DeepSpeed reads only at ZeRO stage 3"));
  }
  SECTION("cpu_offload_use_pin_memory has no effect and is kept") {
    DsConfig c = parse(with_zero({{"stage", 2}, {"cpu_offload_use_pin_memory", false}}));
    CHECK(c.zero.other == json{{"cpu_offload_use_pin_memory", false}});
    check_round_trip(c);
  }
  SECTION("stage3_gather_fp16_weights_on_model_save -> the 16-bit name") {
    DsConfig c =
        parse(with_zero({{"stage", 3}, {"stage3_gather_fp16_weights_on_model_save", true}}));
    CHECK(c.zero.other == json{{"stage3_gather_16bit_weights_on_model_save", true}});
    CHECK_THAT(error_of(with_zero({{"stage3_gather_fp16_weights_on_model_save", true},
                                   {"gather_16bit_weights_on_model_save", false}})),
               Contains("/zero_optimization/stage3_gather_fp16_weights_on_model_save: is the "
                        "deprecated name"));
  }
  SECTION("pydantic attribute names are accepted and written under the JSON names") {
    DsConfig c = parse(with_zero({{"stage", 3},
                                  {"prefetch_bucket_size", 1234},
                                  {"max_live_parameters", 5678},
                                  {"allgather_sequential", false}}));
    CHECK(c.zero.prefetch_bucket_size == 1234);
    CHECK(c.zero.max_live_parameters == 5678);
    CHECK(c.zero.other == json{{"stage3_allgather_sequential", false}});
    json written = check_round_trip(c);
    CHECK(written["zero_optimization"]["stage3_prefetch_bucket_size"] == 1234);
    // 0 is DeepSpeed's "no prefetch"; a negative size is an error named by its spelling.
    CHECK(parse(with_zero({{"stage", 3}, {"prefetch_bucket_size", 0}})).zero.prefetch_bucket_size ==
          0);
    CHECK_THAT(error_of(with_zero({{"stage", 3}, {"prefetch_bucket_size", -1}})),
               Contains("t.json: /zero_optimization/prefetch_bucket_size: must not be negative"));
  }
  SECTION("the old \"zero_optimization\": true form is stage 1 with allgather_size") {
    DsConfig c = parse({{"train_micro_batch_size_per_gpu", 1},
                        {"zero_optimization", true},
                        {"allgather_size", 2e8}});
    CHECK(c.zero.stage == 1);
    CHECK(c.zero.allgather_bucket_size == 200'000'000);
    CHECK_FALSE(c.zero.overlap_comm);
    CHECK(c.other == json::object());
    CHECK(parse({{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", false}}).zero.stage ==
          0);
    check_round_trip(c);
  }
}

TEST_CASE("values DeepSpeed resolves itself", "[zero_config]") {
  // stage_1_and_2.py: contiguous_gradients or cpu_offload.
  DsConfig s2 = parse(with_zero(
      {{"stage", 1}, {"contiguous_gradients", false}, {"offload_optimizer", {{"device", "cpu"}}}}));
  CHECK(s2.zero.contiguous_gradients);
  CHECK_FALSE(parse(with_zero({{"stage", 3},
                               {"contiguous_gradients", false},
                               {"offload_optimizer", {{"device", "cpu"}}}}))
                  .zero.contiguous_gradients);
  // engine.py: stage3_allgather_sequential sets the prefetch bucket to 1 (not with MiCS, which
  // zplan refuses).
  json seq = {
      {"stage", 3}, {"stage3_allgather_sequential", true}, {"stage3_prefetch_bucket_size", 5e7}};
  CHECK(parse(with_zero(seq)).zero.prefetch_bucket_size == 1);
  check_round_trip(parse(with_zero(seq)));
  std::vector<std::string> notes;
  ParseContext noted = context8();
  noted.notes = &notes;
  parse(with_zero(seq), noted);
  REQUIRE(notes.size() == 2);
  CHECK_THAT(notes[0], Contains("t.json: /zero_optimization/stage3_allgather_sequential is true: "
                                "planned as DeepSpeed's engine runs it, with "
                                "stage3_prefetch_bucket_size 1"));
  seq["stage"] = 2;
  CHECK(parse(with_zero(seq)).zero.prefetch_bucket_size == 50'000'000);
  // An offload block with device "none" is as if absent.
  DsConfig none = parse(with_zero(
      {{"stage", 3},
       {"offload_optimizer", {{"device", "none"}, {"buffer_count", 9}, {"super_offload", true}}}}));
  CHECK(none.zero.offload_optimizer.buffer_count == 4);
  CHECK(none.zero.other == json::object());
}

}  // namespace
}  // namespace zplan::sim

namespace zplan::sim::testing {
namespace {

using Catch::Matchers::Contains;

TEST_CASE("a file's problems are reported together, one line each", "[zero_config]") {
  // Six unknown keys in one block, a bad type in another, a bad batch key: DeepSpeed's pydantic
  // validation lists a block's bad fields at once, and zplan lists the whole file's.
  const json j = {{"train_micro_batch_size_per_gpu", 0},
                  {"bf16", {{"enabled", true}, {"loss_scale", 0}, {"hysteresis", 2}}},
                  {"zero_optimization",
                   {{"stage", 3},
                    {"a1", 1},
                    {"a2", 1},
                    {"a3", 1},
                    {"a4", 1},
                    {"a5", 1},
                    {"a6", 1},
                    {"overlap_comm", "sometimes"}}}};
  const std::string e = error_of(j);
  std::vector<std::string> lines;
  std::istringstream in(e);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() == 10);
  // The first line is what a single error would say.
  CHECK(lines[0] ==
        "t.json: /zero_optimization/a1: unknown key (DeepSpeed 0.19's "
        "DeepSpeedZeroConfig (zero_optimization) does not accept it)");
  for (int i = 0; i < 6; ++i) {
    CHECK_THAT(lines[i], Contains("/zero_optimization/a" + std::to_string(i + 1)));
  }
  CHECK_THAT(lines[6], Contains("t.json: /zero_optimization/overlap_comm: must be true or false"));
  CHECK_THAT(lines[7], Contains("t.json: /train_micro_batch_size_per_gpu: must be a positive"));
  CHECK_THAT(lines[8], Contains("t.json: /bf16/hysteresis: unknown key"));
  CHECK_THAT(lines[9], Contains("t.json: /bf16/loss_scale: unknown key"));

  // More than Errors::kMaxLines problems end in a count of the rest.
  json many = with_zero({{"stage", 1}});
  for (int i = 0; i < 30; ++i) many["zero_optimization"]["k" + std::to_string(i)] = i;
  const std::string m = error_of(many);
  CHECK(std::count(m.begin(), m.end(), '\n') == 20);
  CHECK_THAT(m, Contains("\n(and 10 more problems)"));
}

TEST_CASE("parallelism and compile features zplan does not model are refused", "[zero_config]") {
  const json base = with_zero({{"stage", 2}});
  // AutoTP is modelled (tests/sim/tensor_parallel_test.cc): 8 GPUs / 4 = 2 data-parallel ranks.
  CHECK(parse(merged(base, {{"tensor_parallel", {{"autotp_size", 4}}}})).train_batch_size == 2);
  // autotp_size 0 (the default) or 1 leaves AutoTP off (engine.py: autotp_size() > 1).
  for (int tp : {0, 1}) {
    CHECK(parse(merged(base, {{"tensor_parallel", {{"autotp_size", tp}}}})).zero.stage == 2);
  }
  // Ulysses is modelled (tests/sim/sequence_parallel_test.cc): 8 GPUs / sp 4 = 2 data-parallel.
  CHECK(parse(merged(base, {{"sequence_parallel_size", 4}})).train_batch_size == 2);
  CHECK(parse(merged(base, {{"sequence_parallel_size", 1}})).zero.stage == 2);
  CHECK_THAT(error_of(merged(base, {{"sequence_parallel", {{"enabled", true}, {"size", 4}}}})),
             Contains("t.json: /sequence_parallel: not modelled: sequence parallelism"));
  CHECK(parse(merged(base, {{"sequence_parallel", {{"enabled", false}}}})).zero.stage == 2);
  CHECK_THAT(error_of(merged(base, {{"compile", {{"deepcompile", true}}}})),
             Contains("t.json: /compile/deepcompile: not modelled: DeepCompile"));
  CHECK_THAT(error_of(merged(base, {{"compile", {{"backend", "inductor"}}}})),
             Contains("t.json: /compile/backend: unknown key (CompileConfig (compile)"));
  CHECK(parse(merged(base, {{"compile", {{"deepcompile", false}}}})).zero.stage == 2);
  // Gradients reduced in another dtype than the training precision.
  const json bf16 = merged(base, {{"bf16", {{"enabled", true}}}});
  CHECK_THAT(error_of(merged(bf16, {{"communication_data_type", "fp32"}})),
             Contains("t.json: /communication_data_type: not modelled: collectives in fp32 while "
                      "training in bf16"));
  CHECK(parse(merged(bf16, {{"communication_data_type", "BF16"}})).precision == Precision::kBf16);
  CHECK_THAT(error_of(with_zero({{"stage", 2}, {"zenflow", {{"topk_ratio", 0.1}}}})),
             Contains("t.json: /zero_optimization/zenflow: not modelled: ZenFlow"));
  CHECK(parse(with_zero({{"stage", 2}, {"zenflow", nullptr}})).zero.stage == 2);
  CHECK_THAT(
      error_of(with_zero(
          {{"stage", 3}, {"offload_optimizer", {{"device", "cpu"}, {"super_offload", true}}}})),
      Contains("t.json: /zero_optimization/offload_optimizer/super_offload: not modelled: "
               "SuperOffload"));
}

TEST_CASE("offload_param below stage 3 is ignored with a note, as DeepSpeed ignores it",
          "[zero_config]") {
  // LLaVA-NeXT's scripts/zero2_offload.json keeps an offload_param block at stage 2; DeepSpeed
  // gives it only to the stage-3 optimizer.
  std::vector<std::string> notes;
  ParseContext context = context8();
  context.notes = &notes;
  const json file = merged(with_zero({{"stage", 2},
                                      {"offload_param", {{"device", "cpu"}}},
                                      {"offload_optimizer", {{"device", "cpu"}}}}),
                           {{"bf16", {{"enabled", true}}}});
  DsConfig c = parse(file, context);
  CHECK(c.zero.stage == 2);
  CHECK(c.zero.offload_param.device == OffloadDevice::kNone);
  CHECK(c.zero.offload_optimizer.device == OffloadDevice::kCpu);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "t.json: /zero_optimization/offload_param/device is \"cpu\", which DeepSpeed "
                    "reads only at ZeRO stage 3: ignored at stage 2, as DeepSpeed ignores it");
  // At stage 3 it is read.
  notes.clear();
  json z3 = file;
  z3["zero_optimization"]["stage"] = 3;
  CHECK(parse(z3, context).zero.offload_param.device == OffloadDevice::kCpu);
  CHECK(notes.empty());
  // Optimizer offload at stage 0 stays refused: DeepSpeed would hand GPU tensors to its CPU Adam.
  CHECK_THAT(error_of(with_zero({{"stage", 0}, {"offload_optimizer", {{"device", "cpu"}}}})),
             Contains("optimizer offload needs ZeRO stage 1, 2 or 3"));
}

TEST_CASE("elastic training is refused as not modelled", "[zero_config]") {
  const json base = {{"train_micro_batch_size_per_gpu", 1}};
  CHECK_THAT(error_of(merged(base, {{"elasticity", {{"enabled", true},
                                                    {"max_train_batch_size", 2000}}}})),
             Contains("t.json: /elasticity/enabled: not modelled: elastic training"));
  CHECK_NOTHROW(parse(merged(base, {{"elasticity", {{"enabled", false}}}})));
}

}  // namespace
}  // namespace zplan::sim::testing
