// The analytic memory model against the ZeRO paper, DeepSpeed's allocations worked out by hand
// (reference/deepspeed_internals.md §2), and properties every ZeRO memory model must have.
#include <catch2/catch.hpp>

#include "models/catalog.h"
#include "sim/memory_model.h"
#include "tests/sim/sim_test_util.h"

namespace zplan::sim {
namespace {

using testing::config;
using testing::ideal_cluster;
using testing::one_tensor_model;

std::string zero_json(int stage, const std::string& extra = "") {
  return R"({"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": true},
             "zero_optimization": {"stage": )" +
         std::to_string(stage) + extra + "}}";
}

TEST_CASE("model states match the ZeRO paper: 7.5B parameters on 64 GPUs", "[memory]") {
  // Rajbhandari et al., ZeRO, §5 / Figure 1 (reference §2.0), K = 12 (fp32 master, m, v):
  //   DP       (2 + 2 + 12) * 7.5e9            = 120   GB
  //   P_os     2Ψ + 2Ψ + 12Ψ/64                = 31.4  GB
  //   P_os+g   2Ψ + (2 + 12)Ψ/64               = 16.6  GB
  //   P_os+g+p (2 + 2 + 12)Ψ/64                = 1.875 GB
  // 7.5e9 is a multiple of 2 * 64, so DeepSpeed's padding adds nothing.
  const models::Model model = one_tensor_model(7'500'000'000);
  const hardware::Cluster cluster = ideal_cluster(64, 8);
  const double expected[] = {120e9, 31.40625e9, 16.640625e9, 1.875e9};
  for (int stage = 0; stage <= 3; ++stage) {
    DsConfig c = config(zero_json(stage), 64);
    MemoryReport r = analyze_memory(model, cluster, c, Workload{1, Attention::kSdpa});
    CHECK(r.gpu_model_state_bytes == Approx(expected[stage]).epsilon(1e-12));
  }
}

TEST_CASE("stage 2 step peak is 2Ψ + 20Ψ/N as DeepSpeed allocates it", "[memory]") {
  // ref §2.1 [derived] table: inside step(), 16-bit params 2Ψ, fp32 master 4Ψ/N, Adam 8Ψ/N,
  // grads_in_partition 2Ψ/N, the flattened copy 2Ψ/N and its fp32 cast 4Ψ/N = 2Ψ + 20Ψ/N.
  // Ψ = 1,048,576,000 on 8 GPUs: 2,097,152,000 + 2,621,440,000 = 4,718,592,000 bytes.
  const models::Model model = one_tensor_model(1'048'576'000);
  DsConfig c = config(zero_json(2), 8);
  MemoryReport r = analyze_memory(model, ideal_cluster(8), c, Workload{1, Attention::kSdpa});
  CHECK(r.phases[2][Tier::kGpu].total() == Approx(4'718'592'000.0).epsilon(1e-12));
  CHECK(r.phases[2][Tier::kGpu][Category::kGrads32] == Approx(4.0 * 1'048'576'000 / 8));
}

TEST_CASE("stage 1/2 IPG buckets double with overlap_comm, stage 3's do not", "[memory]") {
  // ref §2.1 item 4 and §2.2 item 5: reduce_bucket_size 5e7 elements x 2 bytes = 100 MB per
  // buffer; stage 2 with overlap_comm allocates two, stage 3 always one.
  const models::Model model = one_tensor_model(40'000'000);
  auto buckets = [&](int stage, bool overlap) {
    DsConfig c = config(zero_json(stage, R"(, "reduce_bucket_size": 50000000, "overlap_comm": )" +
                                             std::string(overlap ? "true" : "false")),
                        8);
    MemoryReport r = analyze_memory(model, ideal_cluster(8), c, Workload{1, Attention::kSdpa});
    return r.phases[1][Tier::kGpu][Category::kBuckets];
  };
  // Stage 2 backward: IPG buffers + the flatten copy of one bucket (min(B, Ψ) = 4e7 elements).
  CHECK(buckets(2, false) == Approx(100e6 + 80e6));
  CHECK(buckets(2, true) == Approx(200e6 + 80e6));
  // Stage 3: one IPG buffer + the interleaved copy of one bucket.
  CHECK(buckets(3, false) == Approx(100e6 + 80e6));
  CHECK(buckets(3, true) == Approx(100e6 + 80e6));
}

TEST_CASE("optimizer offload moves 18Ψ/N (+2Ψ/N params) to the host", "[memory]") {
  // ref §2.2 [derived]: stage 3 offload_optimizer=cpu: fp32 grads 4 + 16-bit grad buffer 2
  // pinned, fp32 master 4 (a clone, never pinned: stage3.py _create_fp32_partitions) + Adam m, v 8
  // pageable = 18 bytes per partition element; offload_param adds the 2-byte parameter
  // partition (pinned). Per node: x 8 ranks.
  const models::Model model = one_tensor_model(800'000'000);
  const double P = 100'000'000;  // 8e8 / 8
  DsConfig c = config(zero_json(3, R"(, "offload_optimizer": {"device": "cpu"},
                                        "offload_param": {"device": "cpu"})"),
                      8);
  MemoryReport r = analyze_memory(model, ideal_cluster(8), c, Workload{1, Attention::kSdpa});
  CHECK(r[Tier::kPinnedHost].peak_bytes == Approx(8 * (4 + 2 + 2) * P));
  CHECK(r[Tier::kHost].peak_bytes == Approx(8 * (4 + 8) * P));
  CHECK(r.phases[0][Tier::kGpu][Category::kParams16] == 0);
  CHECK(r.phases[0][Tier::kGpu][Category::kMaster32] == 0);
}

TEST_CASE("16-bit master weights halve the master and its gradient, bf16 states the moments",
          "[memory]") {
  // DeepSpeed PR #7700 (the bf16_master_weight example's table): bf16 master 2, its gradient 2,
  // Adam m, v 2 + 2 with bf16_optimizer_states, against 4, 4, 4 + 4.
  const models::Model model = one_tensor_model(800'000'000);
  const double P = 100'000'000;
  auto bf16 = [](const std::string& zero, bool states) {
    return R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": )" + zero +
           R"(}, "bf16": {"enabled": true, "bf16_master_weights_and_grads": true)" +
           (states ? R"(, "bf16_optimizer_states": true)" : "") + "}}";
  };
  {
    // Stage 3 with CPU offload, fp32 states on the host (DeepSpeedCPUAdam's default).
    DsConfig c = config(bf16(R"(3, "offload_optimizer": {"device": "cpu"})", false), 8);
    MemoryReport r = analyze_memory(model, ideal_cluster(8), c, Workload{1, Attention::kSdpa});
    // The master is a pageable clone, its gradient buffers pinned.
    CHECK(r.phases[0][Tier::kHost][Category::kMaster32] == Approx(8 * 2 * P));
    CHECK(r.phases[0][Tier::kPinnedHost][Category::kMaster32] == 0);
    CHECK(r.phases[0][Tier::kPinnedHost][Category::kGrads32] == Approx(8 * 2 * P));
    CHECK(r[Tier::kHost].peak_bytes == Approx(8 * (2 + 8) * P));
    CHECK(r.master_dtype == Precision::kBf16);
  }
  {
    // Stage 3 without offload, bf16 states in a bf16 run: the optimizer steps the bf16
    // partition itself (stage3.py _create_fp32_partitions), so no master row where fp32 keeps
    // 4 bytes per partition element; states 4 where fp32 keeps 8; and the step's flat gradient
    // is already bf16 (.to() returns it): no master-gradient copy where fp32 makes 4.
    DsConfig c = config(bf16("3", true), 8);
    MemoryReport r = analyze_memory(model, ideal_cluster(8), c, Workload{1, Attention::kSdpa});
    CHECK(r.phases[0][Tier::kGpu][Category::kMaster32] == 0);
    CHECK(r.phases[0][Tier::kGpu][Category::kOptimizerStates] == Approx(4 * P));
    CHECK(r.phases[2][Tier::kGpu][Category::kGrads32] == 0);
    // So the model states are 8 bytes per partition element lighter than the same run's.
    DsConfig f = config(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
                            "zero_optimization": {"stage": 3}})",
                        8);
    MemoryReport rf = analyze_memory(model, ideal_cluster(8), f, Workload{1, Attention::kSdpa});
    CHECK(rf.gpu_model_state_bytes - r.gpu_model_state_bytes == Approx((4 + 4) * P));
  }
  {
    // The same flags in an fp16 run: the bf16 master is a copy (2 bytes), the fp16 gradients
    // are cast to it at the step (2 bytes), and the rows say bf16.
    std::string json = bf16("3", true);
    json.insert(json.size() - 1, R"(, "fp16": {"enabled": true})");
    json.replace(json.find(R"("enabled": true, "bf16_master)"), 15, R"("enabled": false)");
    DsConfig c = config(json, 8);
    REQUIRE(c.precision == Precision::kFp16);
    MemoryReport r = analyze_memory(model, ideal_cluster(8), c, Workload{1, Attention::kSdpa});
    CHECK(r.phases[0][Tier::kGpu][Category::kMaster32] == Approx(2 * P));
    CHECK(r.phases[2][Tier::kGpu][Category::kGrads32] == Approx(2 * P));
    CHECK(r.master_dtype == Precision::kBf16);
  }
  {
    // Stage 2 offload with gradient accumulation: the fp32 master accumulates micro-steps in
    // accumulated_grads_in_cpu (p per element, pinned); a 16-bit master accumulates in its own
    // gradient, of which that buffer is a view (stage_1_and_2.py
    // async_accumulate_grad_in_cpu_via_gpu).
    auto gas = [](std::string json) {
      return json.insert(1, R"("gradient_accumulation_steps": 4, )");
    };
    const std::string z2 = R"(2, "offload_optimizer": {"device": "cpu"})";
    DsConfig c = config(gas(bf16(z2, false)), 8);
    DsConfig f = config(gas(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
                                "zero_optimization": {"stage": )" + z2 + "}}"),
                        8);
    auto pinned_grads = [&](const DsConfig& d) {
      return analyze_memory(model, ideal_cluster(8), d, Workload{1, Attention::kSdpa})
          .phases[0][Tier::kPinnedHost][Category::kGrads];
    };
    CHECK(pinned_grads(f) == Approx(8 * 2 * P));
    CHECK(pinned_grads(c) == 0);
  }
  {
    // DeepSpeedCPUAdam built with fp32_optimizer_states false keeps its moments in the dtype of
    // the parameter it steps: the bf16 master's (cpu_adam.py), 4 bytes where fp32 states take 8.
    const std::string json =
        R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2,
            "offload_optimizer": {"device": "cpu"}}, "bf16": {"enabled": true,
            "bf16_master_weights_and_grads": true}, "optimizer": {"type": "AdamW",
            "params": {"lr": 1e-5, "fp32_optimizer_states": false}}})";
    DsConfig c = config(json, 8);
    CHECK(c.optimizer.state_dtype == Precision::kBf16);
    MemoryReport r = analyze_memory(model, ideal_cluster(8), c, Workload{1, Attention::kSdpa});
    CHECK(r.phases[0][Tier::kHost][Category::kOptimizerStates] == Approx(8 * 4 * P));
  }
}

TEST_CASE("fp32 training at stage 3 steps the parameters' partition as its master", "[memory]") {
  // stage3.py _create_fp32_partitions reuses fp16_partitioned_groups_flat when it already has the
  // master's dtype and device, and the step's .to(fp32) of an fp32 flat gradient returns it: no
  // master row, no master-gradient copy. Stage 2 clones its master (stage_1_and_2.py), but its
  // step's cast is the same tensor too.
  const models::Model model = one_tensor_model(800'000'000);
  const double P = 100'000'000;
  auto fp32 = [](int stage) {
    return R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": )" +
           std::to_string(stage) + "}}";
  };
  MemoryReport r3 = analyze_memory(model, ideal_cluster(8), config(fp32(3), 8),
                                   Workload{1, Attention::kSdpa});
  CHECK(r3.phases[0][Tier::kGpu][Category::kMaster32] == 0);
  CHECK(r3.phases[0][Tier::kGpu][Category::kParams16] == Approx(4 * P));
  CHECK(r3.phases[2][Tier::kGpu][Category::kGrads32] == 0);
  MemoryReport r2 = analyze_memory(model, ideal_cluster(8), config(fp32(2), 8),
                                   Workload{1, Attention::kSdpa});
  CHECK(r2.phases[0][Tier::kGpu][Category::kMaster32] == Approx(4 * P));
  CHECK(r2.phases[2][Tier::kGpu][Category::kGrads32] == 0);
  // With optimizer offload the master is a clone on the host at stage 3 too.
  MemoryReport ro = analyze_memory(
      model, ideal_cluster(8),
      config(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3,
                 "offload_optimizer": {"device": "cpu"}}})",
             8),
      Workload{1, Attention::kSdpa});
  CHECK(ro.phases[0][Tier::kHost][Category::kMaster32] == Approx(8 * 4 * P));
}

TEST_CASE("NVMe offload puts 16 bytes per partition element on NVMe", "[memory]") {
  // fp32 params, m, v and fp32 grads are swapped (ref §2.2 "NVMe bytes per rank"); swap buffers:
  // buffer_count 4 x the largest sub-group (here the whole partition, 1e8) x 4 bytes, pinned.
  const models::Model model = one_tensor_model(800'000'000);
  const double P = 100'000'000;
  DsConfig c = config(zero_json(3, R"(, "offload_optimizer": {"device": "nvme",
                                        "nvme_path": "/nvme"})"),
                      8);
  MemoryReport r = analyze_memory(model, ideal_cluster(8), c, Workload{1, Attention::kSdpa});
  CHECK(r[Tier::kNvme].peak_bytes == Approx(8 * 16 * P));
  CHECK(r.phases[0][Tier::kPinnedHost][Category::kSwapBuffers] == Approx(8 * 4 * P * 4));
}

TEST_CASE("stage 3 per-GPU memory never grows with more GPUs", "[memory][property]") {
  for (const char* name : {"llama2-7b", "20b", "1.3b"}) {
    const models::Model model = models::load_model(name);
    double previous = 0;
    for (int gpus : {8, 16, 32, 64, 128, 256, 512}) {
      DsConfig c = config(zero_json(3), gpus, model.shape().hidden);
      MemoryReport r = analyze_memory(model, ideal_cluster(gpus, gpus / 8), c,
                                      Workload{2048, Attention::kSdpa});
      double peak = r[Tier::kGpu].peak_bytes;
      if (previous > 0) CHECK(peak <= previous);
      previous = peak;
    }
  }
}

TEST_CASE("model states shrink stage by stage: 3 <= 2 <= 1 <= 0", "[memory][property]") {
  for (const char* name : {"125m", "20b", "llama3-8b", "tiny-mlp"}) {
    const models::Model model = models::load_model(name);
    for (int gpus : {1, 2, 8, 64}) {
      double previous = 1e300;
      for (int stage = 0; stage <= 3; ++stage) {
        DsConfig c = config(zero_json(stage), gpus, model.shape().hidden);
        MemoryReport r = analyze_memory(model, ideal_cluster(gpus, (gpus + 7) / 8), c,
                                        Workload{model.shape().default_seq_len, Attention::kSdpa});
        CHECK(r.gpu_model_state_bytes <= previous * (1 + 1e-12));
        previous = r.gpu_model_state_bytes;
      }
    }
  }
}

TEST_CASE("activation checkpointing lowers the activation peak", "[memory]") {
  const models::Model model = models::load_model("llama2-7b");
  DsConfig plain = config(zero_json(3), 8, 4096);
  DsConfig ckpt = plain;
  ckpt.activation_checkpointing.enabled = true;
  Workload w{4096, Attention::kSdpa};
  MemoryReport a = analyze_memory(model, ideal_cluster(8), plain, w);
  MemoryReport b = analyze_memory(model, ideal_cluster(8), ckpt, w);
  CHECK(b[Tier::kGpu].peak_bytes < a[Tier::kGpu].peak_bytes);
  // cpu_checkpointing moves the checkpoints to host memory.
  DsConfig cpu = ckpt;
  cpu.activation_checkpointing.cpu_checkpointing = true;
  MemoryReport h = analyze_memory(model, ideal_cluster(8), cpu, w);
  CHECK(h[Tier::kGpu].peak_bytes < b[Tier::kGpu].peak_bytes);
  CHECK(h[Tier::kHost].peak_bytes > b[Tier::kHost].peak_bytes);
}

TEST_CASE("persistence threshold keeps small parameters gathered in stage 3", "[memory]") {
  // llama2-7b norms (4096 elements) are persistent at the default 1e5; a threshold of 0 makes
  // nothing persistent, and one above the largest tensor makes everything persistent.
  const models::Model model = models::load_model("llama2-7b");
  auto persistent = [&](const char* threshold) {
    DsConfig c = config(zero_json(3, std::string(R"(, "stage3_param_persistence_threshold": )") +
                                         threshold),
                        8, 4096);
    return zero_sizes(model, 8, c).persistent;
  };
  CHECK(persistent("0") == 0);
  // 32 layers x 2 norms + the final norm, 4096 elements each.
  CHECK(persistent("100000") == Approx(65 * 4096));
  CHECK(persistent("1e12") == Approx(static_cast<double>(model.num_params())));
}

TEST_CASE("a ZeRO-3 model built outside zero.Init peaks at initialization: the whole model",
          "[memory]") {
  // deepspeed.initialize moves a module that is not yet partitioned to the GPU whole before
  // stage 3 partitions it (engine.py _configure_distributed_model): p * Ψ. Llama-2-7B in fp16:
  // 2 * 6,738,415,616 = 13,476,831,232 bytes. On 64 ideal GPUs (no runtime memory, no
  // fragmentation) at 128 tokens the step holds less than half of it: 16Ψ/64 = 1.7 GB of
  // states, the 1 GB IPG bucket, gathered parameters and small activations.
  const models::Model model = models::load_model("llama2-7b");
  const hardware::Cluster cluster = ideal_cluster(64, 8);
  const DsConfig c = config(zero_json(3), 64, 4096);
  Workload built_outside{128, Attention::kSdpa};
  built_outside.zero_init = false;
  const Workload under_init{128, Attention::kSdpa};
  const double init = 2.0 * 6'738'415'616;
  const MemoryReport r = analyze_memory(model, cluster, c, built_outside);
  CHECK(r[Tier::kGpu].peak_bytes == init);
  CHECK(r[Tier::kGpu].peak_phase == Phase::kInit);
  CHECK(r[Tier::kGpu].at_peak[Category::kParams16] == init);
  const MemoryReport usual = analyze_memory(model, cluster, c, under_init);
  CHECK(usual[Tier::kGpu].peak_phase != Phase::kInit);
  CHECK(usual[Tier::kGpu].peak_bytes < init / 2);
  // The step's phases are the same either way.
  CHECK(r.phases[1][Tier::kGpu].total() == usual.phases[1][Tier::kGpu].total());
  // The runtime is there from the start: the init moment carries the CUDA context and NCCL
  // buffers too.
  hardware::Profile profile = testing::ideal_profile();
  profile.runtime.cuda_context_bytes = 1e9;
  profile.runtime.nccl_buffer_bytes = 0.5e9;
  const hardware::Cluster with_runtime = hardware::make_cluster(profile, 64, 8);
  const MemoryBreakdown at_init =
      init_gpu_memory(zero_sizes(model, 64, c), with_runtime, c, built_outside);
  CHECK(at_init.total() == init + 1.5e9);
  // Below stage 3 the whole model is on the GPU in every phase: nothing changes.
  const DsConfig z2 = config(zero_json(2), 64, 4096);
  CHECK(init_gpu_memory(zero_sizes(model, 64, z2), cluster, z2, built_outside).total() == 0);
  CHECK(analyze_memory(model, cluster, z2, built_outside)[Tier::kGpu].peak_bytes ==
        analyze_memory(model, cluster, z2, under_init)[Tier::kGpu].peak_bytes);
}

TEST_CASE("the zero_sizes cache answers what zero_sizes computes, field by field", "[memory]") {
  // Configs that differ in every field zero_sizes reads, and in some it does not, asked in an
  // order where each follows one that differs from it in one field: a key missing a field would
  // answer with the earlier config's sizes.
  const models::Model model = models::load_model("1.3b");
  const char* const configs[] = {
      R"({"train_batch_size": 8, "zero_optimization": {"stage": 3}})",
      R"({"train_batch_size": 8, "zero_optimization": {"stage": 2}})",
      R"({"train_batch_size": 8, "zero_optimization": {"stage": 1}})",
      R"({"train_batch_size": 8, "zero_optimization": {"stage": 0}})",
      R"({"train_batch_size": 8, "bf16": {"enabled": true}, "zero_optimization": {"stage": 0}})",
      R"({"train_batch_size": 8, "bf16": {"enabled": true}, "data_types": {"grad_accum_dtype": "fp32"},
          "zero_optimization": {"stage": 1}})",
      R"({"train_batch_size": 8, "zero_optimization": {"stage": 3, "reduce_bucket_size": 1e7}})",
      R"({"train_batch_size": 8, "zero_optimization": {"stage": 3,
          "stage3_param_persistence_threshold": 1e7}})",
      R"({"train_batch_size": 8, "zero_optimization": {"stage": 3,
          "stage3_param_persistence_threshold": 1e7, "stage3_model_persistence_threshold": 1e6}})",
      R"({"train_batch_size": 8, "zero_optimization": {"stage": 3, "stage3_max_reuse_distance": 0}})",
      R"({"train_batch_size": 8, "zero_optimization": {"stage": 3, "sub_group_size": 1e8}})",
      R"({"train_batch_size": 8, "zero_optimization": {"stage": 3, "sub_group_size": 1e8,
          "offload_optimizer": {"device": "cpu"}}})",
      R"({"train_batch_size": 8, "zero_optimization": {"stage": 3, "sub_group_size": 1e8,
          "offload_optimizer": {"device": "cpu", "ratio": 0.5}}})",
      R"({"train_batch_size": 8, "zero_optimization": {"stage": 3, "sub_group_size": 1e8,
          "offload_optimizer": {"device": "cpu", "ratio": 0.5}, "overlap_comm": false}})",
  };
  ZeroSizesCache cache;
  for (int dp : {8, 2}) {
    for (const char* json : configs) {
      INFO(json << " on " << dp);
      const DsConfig c = config(json, dp, model.shape().hidden);
      const ZeroSizes want = zero_sizes(model, dp, c);
      const ZeroSizes& got = cache.get(model, dp, c);
      CHECK(got.dp == want.dp);
      CHECK(got.param_bytes == want.param_bytes);
      CHECK(got.grad_accum_bytes == want.grad_accum_bytes);
      CHECK(got.psi == want.psi);
      CHECK(got.partition == want.partition);
      CHECK(got.largest_param == want.largest_param);
      CHECK(got.bucket == want.bucket);
      CHECK(got.persistent == want.persistent);
      CHECK(got.largest_fetch == want.largest_fetch);
      CHECK(got.non_persistent == want.non_persistent);
      CHECK(got.reuse_retained == want.reuse_retained);
      CHECK(got.max_sub_group == want.max_sub_group);
      CHECK(got.sub_groups == want.sub_groups);
      CHECK(got.sub_group_sizes == want.sub_group_sizes);
      CHECK(got.module_fetch == want.module_fetch);
      CHECK(got.cpu_partition == want.cpu_partition);
    }
  }
}

}  // namespace
}  // namespace zplan::sim
