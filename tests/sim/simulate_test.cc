// The simulator end to end: closed forms on the idealized profile, properties, determinism,
// and the agreement of its memory timeline with the analytic model.
#include <catch2/catch.hpp>

#include "base/json_reader.h"
#include "hardware/cost_model.h"
#include "models/catalog.h"
#include "sim/engine.h"
#include "sim/memory_model.h"
#include "sim/simulate.h"
#include "sim/step_builder.h"
#include "sim/step_costs.h"
#include "tests/sim/sim_test_util.h"

namespace zplan::sim {
namespace {

using testing::config;
using testing::ideal_cluster;

std::string zero_json(int stage, const std::string& extra = "", int micro = 1, int gas = 1) {
  return R"({"train_micro_batch_size_per_gpu": )" + std::to_string(micro) +
         R"(, "gradient_accumulation_steps": )" + std::to_string(gas) +
         R"(, "bf16": {"enabled": true}, "zero_optimization": {"stage": )" +
         std::to_string(stage) + extra + "}}";
}

double task_seconds(const StepResult& r) {
  double s = 0;
  for (const ResourceUse& u : r.resources) s += u.busy_s;
  return s;
}

TEST_CASE("a collective alone takes exactly its alpha-beta time", "[simulate]") {
  // The engine adds nothing to the cost model's latency + bytes / bandwidth.
  hardware::Cluster cluster = ideal_cluster(8);
  for (double bytes : {1e3, 1e6, 1e9}) {
    hardware::CollectiveCost cost =
        hardware::collective_cost(cluster, hardware::Collective::kAllGather, bytes);
    StepGraph g;
    Task t;
    t.kind = TaskKind::kAllGather;
    t.resource = Resource::kGatherStream;
    t.link = LinkSlot::kIntraNode;
    t.latency_s = cost.latency_s;
    t.work_s = cost.transfer_s;
    g.add(t);
    g.finalize();
    Simulator s;
    EngineResult r;
    s.run(g, EngineOptions{}, &r);
    // Latency and transfer are each rounded to whole nanoseconds once.
    CHECK(to_seconds(r.end) == Approx(cost.total_s()).margin(1e-9));
  }
}

TEST_CASE("a compute-only step takes its FLOPs over the effective rate", "[simulate]") {
  // tiny-mlp on one GPU, stage 0: no communication; the ideal GPU runs every GEMM at 100 TFLOP/s
  // and memory-bound work in no time. Forward + backward = 3 x forward FLOPs (the backward of
  // each GEMM is two GEMMs of the same size).
  const models::Model model = models::load_model("tiny-mlp");
  DsConfig c = config(zero_json(0, "", 64), 1);
  Workload w{1, Attention::kSdpa};
  StepResult r = simulate_step(model, ideal_cluster(1), c, w);
  const double flops = 3 * model.forward_flops(1, 64);
  // Each task's duration is rounded to the nanosecond: allow half a nanosecond per task.
  CHECK(r.step_time_s == Approx(flops / 100e12).margin(0.5e-9 * r.tasks));
  CHECK(r.mfu == Approx(1.0).epsilon(1e-3));
}

TEST_CASE("Llama 4's unpicked expert copies are hardware FLOPs, not model FLOPs", "[simulate]") {
  // Llama4TextMoe runs all E experts on every token and scales the unpicked copies by 0: of the
  // two bmm's FLOPs (forward and backward) only k / E are the model's (MFU), all of them the
  // hardware's (HFU).
  const int64_t h = 64, f = 128, e = 4, tokens = 64;
  const models::Model model = models::model_from_hf_config(
      parse_json_text(R"({"model_type": "llama4_text", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 16,
        "intermediate_size": 128, "intermediate_size_mlp": 256, "vocab_size": 100,
        "num_local_experts": 4, "num_experts_per_tok": 1})",
                      "l4.json"),
      "l4.json");
  DsConfig c = config(zero_json(0), 1, tokens);
  StepResult r = simulate_step(model, ideal_cluster(1), c, Workload{tokens, Attention::kSdpa});
  const double bmm_fwd = 2.0 * tokens * e * (2 * f * h + h * f);  // per MoE block
  CHECK(r.hardware_flops_per_gpu - r.model_flops_per_gpu ==
        Approx(2 * 3 * bmm_fwd * (e - 1) / e).epsilon(1e-9));
  CHECK(r.mfu < r.hfu);
}

TEST_CASE("without overlap_comm the step is the sum of its parts", "[simulate]") {
  // Every task runs on the compute stream: nothing overlaps, so the step time equals the sum of
  // all task durations.
  const models::Model model = models::load_model("1.3b");
  for (int stage : {1, 2, 3}) {
    DsConfig c = config(zero_json(stage, R"(, "overlap_comm": false)"), 8, 2048);
    StepResult r = simulate_step(model, ideal_cluster(8), c, Workload{2048, Attention::kSdpa});
    INFO("stage " << stage);
    CHECK(r.step_time_s == Approx(task_seconds(r)).epsilon(1e-6));
  }
}

TEST_CASE("framework terms: step overhead, host floor, pageable copies, CPU oversubscription",
          "[simulate]") {
  // Each term on the idealized profile (hardware/framework.h; docs/cost_model.md §14).
  const models::Model model = models::load_model("tiny-mlp");
  auto run = [&](const hardware::FrameworkSpec& f, const std::string& json, int gpus) {
    hardware::Profile p = testing::ideal_profile();
    p.framework = f;
    return simulate_step(model, hardware::make_cluster(p, gpus, 1), config(json, gpus),
                         Workload{64, Attention::kSdpa});
  };
  const hardware::FrameworkSpec none;
  // A piece of 3 operations whose module (2 parameters, 2 gradients) stage 3 gathers.
  auto gathered_piece = [] {
    Piece pc;
    pc.first_op = 0;
    pc.end_op = 3;
    pc.fwd_ops = 3;  // one kernel each, two backward
    pc.bwd_ops = 6;
    pc.fetch_module = 0;
    pc.fetch_params = 2;
    pc.grads = {10, 20};
    return pc;
  };
  SECTION("the step's fixed host time is added once, on the compute stream") {
    hardware::FrameworkSpec f;
    f.step_overhead_s = 0.5;
    const std::string json = zero_json(1, R"(, "overlap_comm": false)", 4);
    CHECK(run(f, json, 8).step_time_s - run(none, json, 8).step_time_s == Approx(0.5).margin(1e-6));
  }
  SECTION("the GPU cannot run ahead of the host that issues its operators") {
    hardware::FrameworkSpec f;
    f.host_op_s = 1e-3;  // far above the ideal GPU's kernels
    double ops = 0;
    for (const models::Layer& layer : model.layers()) ops += static_cast<double>(layer.ops.size());
    const std::string json = zero_json(0, "", 4);
    // Forward one operator per operation, backward two: at least 3 x ops x 1 ms.
    CHECK(run(f, json, 1).step_time_s >= 3 * ops * 1e-3);
    CHECK(run(none, json, 1).step_time_s < 3 * ops * 1e-3);
  }
  SECTION("stage 3's module hooks add their fetch and release to the host floor") {
    hardware::FrameworkSpec f;
    f.host_op_s = 1e-3;
    // Each gathered module's use costs 4 + 5 per parameter host operators (fetch_sub_module,
    // release_sub_module), forward and backward; stage 2 has no module hooks.
    CHECK(stage3_fetch_host_ops(0) == 0);
    CHECK(stage3_fetch_host_ops(2) == 14);
    Piece pc = gathered_piece();
    const HostOps z3 = piece_host_ops(pc, true), z2 = piece_host_ops(pc, false);
    CHECK(z3.fwd == 3 + 14);
    CHECK(z3.bwd == 6 + 14 + 2);
    CHECK(z2.fwd == 3);
    CHECK(z2.bwd == 6 + 2);
    double fetch_ops = 0;
    for (const models::Layer& layer : model.layers()) {
      for (const models::Module& m : layer.modules) {
        fetch_ops += stage3_fetch_host_ops(static_cast<double>(m.params.size()));
      }
    }
    REQUIRE(fetch_ops > 0);
    const std::string z3json = zero_json(3, R"(, "stage3_param_persistence_threshold": 0)", 4);
    const std::string z2json = zero_json(2, "", 4);
    // Forward and backward each fetch every module once (no recompute): at least 2 x fetch_ops
    // more host time than stage 2, whose host floor is otherwise the same (10% for the two
    // stages' different exposed tails: the last reductions, the optimizer step).
    CHECK(run(f, z3json, 8).step_time_s - run(f, z2json, 8).step_time_s >=
          0.9 * 2 * fetch_ops * 1e-3);
  }
  SECTION("stage 3's hooks' Python per gathered module adds to the same floor, in each pass") {
    Piece pc = gathered_piece();
    const HostOps z3 = piece_host_ops(pc, true), z2 = piece_host_ops(pc, false);
    CHECK(z3.fetch_fwd == 1);
    CHECK(z3.fetch_bwd == 1);
    CHECK(z2.fetch_fwd == 0);
    CHECK(z2.fetch_bwd == 0);
    pc.no_grad = true;  // a frozen layer no gradient reaches has no backward and no hook there
    CHECK(piece_host_ops(pc, true).fetch_bwd == 0);
    pc.no_grad = false;
    pc.fetch_module = -1;  // a piece whose module is persistent or needs no gather
    CHECK(piece_host_ops(pc, true).fetch_fwd == 0);
    size_t fetched = 0;
    for (const models::Layer& layer : model.layers()) fetched += layer.modules.size();
    REQUIRE(fetched > 0);
    hardware::FrameworkSpec f;
    f.stage3_fetch_s = 0.01;  // 10 ms a use, far above the ideal GPU's kernels
    const std::string z3json = zero_json(3, R"(, "stage3_param_persistence_threshold": 0)", 4);
    const std::string z2json = zero_json(2, "", 4);
    // Every module gathered once forward and once backward: at least 2 x 10 ms each; stage 2
    // gathers nothing and does not move.
    CHECK(run(f, z3json, 8).step_time_s - run(none, z3json, 8).step_time_s >=
          0.9 * 2 * static_cast<double>(fetched) * 0.01);
    CHECK(run(f, z2json, 8).step_time_s == run(none, z2json, 8).step_time_s);
    // That wait is the host's on the critical path, not compute: the step is host-bound.
    const StepResult hooked = run(f, z3json, 8);
    const double host = hooked.critical_path_s[static_cast<int>(PathPart::kHost)];
    CHECK(host >= 0.9 * 2 * static_cast<double>(fetched) * 0.01);
    CHECK(run(none, z3json, 8).critical_path_s[static_cast<int>(PathPart::kHost)] == 0);
    double sum = 0;
    for (double s : hooked.critical_path_s) sum += s;
    CHECK(sum == Approx(hooked.step_time_s).epsilon(1e-9));
    CHECK_THAT(hooked.bound(), Catch::StartsWith("host-bound: the GPU waits for the Python"));
  }
  SECTION("pageable offload copies hold the compute stream; pinned ones overlap") {
    const std::string pinned = zero_json(
        2, R"(, "offload_optimizer": {"device": "cpu", "pin_memory": true})", 4, 2);
    const std::string pageable = zero_json(
        2, R"(, "offload_optimizer": {"device": "cpu", "pin_memory": false})", 4, 2);
    const StepResult a = run(none, pinned, 8), b = run(none, pageable, 8);
    CHECK(b.step_time_s > a.step_time_s);
    CHECK(b.resources[static_cast<int>(Resource::kD2H)].busy_s == 0);
    CHECK(a.resources[static_cast<int>(Resource::kD2H)].busy_s > 0);
  }
  SECTION("the offload step's host passes, and stage 3's pageable copy of the new parameters") {
    // unscale_and_clip_grads (8 B) and the fp32 -> 16-bit cast (4 + 2 B) of every partition
    // element at the rank's share of host DRAM, beside the CPU Adam (docs/cost_model.md §10).
    const std::string z2 =
        zero_json(2, R"(, "offload_optimizer": {"device": "cpu", "pin_memory": true})", 4);
    const std::string z3 =
        zero_json(3, R"(, "offload_optimizer": {"device": "cpu", "pin_memory": true})", 4);
    const hardware::Profile p = testing::ideal_profile();
    for (int stage : {2, 3}) {
      const std::string& json = stage == 2 ? z2 : z3;
      const DsConfig c = config(json, 8);
      const ZeroSizes z = zero_sizes(model, 8, c);
      const double adam = hardware::offload_cpu_adam_time_s(p, z.partition, 8,
                                                             c.optimizer.step_bytes());
      const double passes = hardware::host_pass_time_s(p, (8 + 4 + 2) * z.partition, 8);
      CHECK(passes == Approx(14 * z.partition * 8 / p.node.host_memory_bw_bytes_per_s));
      INFO("stage " << stage);
      CHECK(run(none, json, 8).resources[static_cast<int>(Resource::kCpuOptimizer)].busy_s ==
            Approx(adam + passes).epsilon(1e-9));
    }
    // Stage 1-2 copy the pinned 16-bit buffer to the GPU on the copy engine; stage 3's
    // cross-dtype copy_ comes from a pageable temporary, on the compute stream, pinned or not.
    CHECK(run(none, z2, 8).resources[static_cast<int>(Resource::kH2D)].busy_s > 0);
    CHECK(run(none, z3, 8).resources[static_cast<int>(Resource::kH2D)].busy_s == 0);
    // bf16 master weights (bf16_master_weights_and_grads): the unscale reads and writes 2-byte
    // gradients (4 B); stage 1-2 still copy the master into the 16-bit buffer (2 + 2 B), and
    // stage 3's copy_ is a same-dtype copy from the master, with no host cast: pageable, as the
    // master is never pinned, so on the compute stream like fp32's.
    auto bf16_master = [](std::string json) {
      const std::string plain = R"("bf16": {"enabled": true})";
      json.replace(json.find(plain), plain.size(),
                   R"("bf16": {"enabled": true, "bf16_master_weights_and_grads": true})");
      return json;
    };
    for (int stage : {2, 3}) {
      const std::string json = bf16_master(stage == 2 ? z2 : z3);
      const DsConfig c = config(json, 8);
      REQUIRE(c.optimizer.master_bytes() == 2);
      const ZeroSizes z = zero_sizes(model, 8, c);
      const double adam = hardware::offload_cpu_adam_time_s(p, z.partition, 8,
                                                             c.optimizer.step_bytes());
      const double passes =
          hardware::host_pass_time_s(p, (4 + (stage == 2 ? 4 : 0)) * z.partition, 8);
      INFO("bf16 master, stage " << stage);
      CHECK(run(none, json, 8).resources[static_cast<int>(Resource::kCpuOptimizer)].busy_s ==
            Approx(adam + passes).epsilon(1e-9));
    }
    CHECK(run(none, bf16_master(z3), 8).resources[static_cast<int>(Resource::kH2D)].busy_s == 0);
    CHECK(run(none, bf16_master(z3), 8).step_time_s < run(none, z3, 8).step_time_s);
    // step() walks stage 3's sub-groups on one thread: each update waits for the previous
    // sub-group's blocking copy, so the step holds every update and every copy end to end.
    const std::string groups = zero_json(
        3, R"(, "sub_group_size": 1000, "offload_optimizer": {"device": "cpu", "pin_memory": true})",
        4);
    const ZeroSizes zg = zero_sizes(model, 8, config(groups, 8));
    REQUIRE(zg.sub_groups > 2);
    double copies = 0;
    for (double e : zg.sub_group_sizes) copies += hardware::pageable_copy_time_s(p, 2 * e, true, 8);
    const StepResult r = run(none, groups, 8);
    CHECK(r.optimizer_step_s >=
          r.resources[static_cast<int>(Resource::kCpuOptimizer)].busy_s + copies - 1e-12);
  }
  SECTION("oversubscribed CPU Adam threads slow the CPU step in proportion") {
    hardware::FrameworkSpec f;
    f.cpu_oversubscription_efficiency = 0.25;
    const std::string json =
        zero_json(2, R"(, "offload_optimizer": {"device": "cpu", "pin_memory": true})", 4);
    const double slow = run(f, json, 8).resources[static_cast<int>(Resource::kCpuOptimizer)].busy_s;
    const double fast =
        run(none, json, 8).resources[static_cast<int>(Resource::kCpuOptimizer)].busy_s;
    // 8 of 64 cores per rank: core-bound at 0.8e9 params/s at full efficiency (DRAM allows
    // 0.89e9), 0.2e9 at a quarter; the host unscale pass is the same in both.
    CHECK(slow > 3 * fast);
    CHECK(slow < 4 * fast);
  }
}

TEST_CASE("turning overlap_comm on never slows a step", "[simulate][property]") {
  for (const char* name : {"1.3b", "llama2-7b", "20b"}) {
    const models::Model model = models::load_model(name);
    for (int stage : {1, 2, 3}) {
      for (int gas : {1, 4}) {
        for (const char* bucket : {"5e7", "5e8"}) {
          std::string extra = std::string(R"(, "reduce_bucket_size": )") + bucket;
          DsConfig off = config(zero_json(stage, extra + R"(, "overlap_comm": false)", 1, gas), 8,
                                model.shape().hidden);
          DsConfig on = config(zero_json(stage, extra + R"(, "overlap_comm": true)", 1, gas), 8,
                               model.shape().hidden);
          Workload w{2048, Attention::kSdpa};
          double t_off = simulate_step(model, ideal_cluster(8), off, w).step_time_s;
          double t_on = simulate_step(model, ideal_cluster(8), on, w).step_time_s;
          INFO(name << " stage " << stage << " gas " << gas << " bucket " << bucket);
          CHECK(t_on <= t_off * (1 + 1e-9));
        }
      }
    }
  }
}

TEST_CASE("stage 3 sends 1.5x stage 2's volume at gas 1 (per-owner reduce), ~1x with the "
          "bucket all-reduce DeepSpeed uses by default", "[simulate]") {
  // ZeRO paper §7 (reference §4.1): stage 2 = reduce-scatter Ψ + all-gather Ψ = 2Ψ; stage 3 =
  // all-gather Ψ (forward) + Ψ (backward) + reduce-scatter Ψ = 3Ψ. DeepSpeed 0.19's default
  // use_multi_rank_bucket_allreduce all-reduces whole buckets instead (2Ψ + Ψ = 3Ψ, ref §4.2).
  // llama2-7b: untied embeddings, so that no module is gathered a third time (a tied LM head
  // gathers the embedding again, adding V*h per use).
  const models::Model model = models::load_model("llama2-7b");
  Workload w{2048, Attention::kSdpa};
  // No persistent parameters and no reuse, so that stage 3 gathers every parameter twice.
  const std::string s3 = R"(, "stage3_param_persistence_threshold": 0,
                             "stage3_max_reuse_distance": 0)";
  DsConfig z3 = config(zero_json(3, s3), 8, 4096);
  DsConfig z2 = config(zero_json(2, R"(, "use_multi_rank_bucket_allreduce": false)"), 8, 4096);
  DsConfig z2_default = config(zero_json(2), 8, 4096);
  double v3 = simulate_step(model, ideal_cluster(8), z3, w).wire_bytes;
  double v2 = simulate_step(model, ideal_cluster(8), z2, w).wire_bytes;
  double v2_default = simulate_step(model, ideal_cluster(8), z2_default, w).wire_bytes;
  CHECK(v3 / v2 == Approx(1.5).epsilon(0.01));
  CHECK(v3 / v2_default == Approx(1.0).epsilon(0.01));
}

TEST_CASE("stage 3 with reduce_scatter false all-reduces its buckets: 4 psi instead of 3",
          "[simulate]") {
  // stage3.py __reduce_and_partition_ipg_grads: contiguous gradients, a bucket within
  // reduce_bucket_size and reduce_scatter false -> __avg_scatter_contiguous_grads, one all_reduce
  // of the bucket (2 psi on the wire, nccl-tests' factor 2(N-1)/N) instead of a reduce_scatter
  // (psi): with the 2 psi of gathers, 4 psi against 3. Counted per step: as many all-reduces as
  // there were reduce-scatters, and their mean size is the same.
  const models::Model model = models::load_model("llama2-7b");
  Workload w{2048, Attention::kSdpa};
  const std::string s3 = R"(, "stage3_param_persistence_threshold": 0,
                             "stage3_max_reuse_distance": 0)";
  DsConfig rs = config(zero_json(3, s3), 8, 4096);
  DsConfig ar = config(zero_json(3, s3 + R"(, "reduce_scatter": false)"), 8, 4096);
  const StepResult a = simulate_step(model, ideal_cluster(8), rs, w);
  const StepResult b = simulate_step(model, ideal_cluster(8), ar, w);
  CHECK(b.wire_bytes / a.wire_bytes == Approx(4.0 / 3).epsilon(0.01));
  const int k_rs = static_cast<int>(TaskKind::kReduceScatter);
  const int k_ar = static_cast<int>(TaskKind::kAllReduce);
  CHECK(a.tasks_by_kind[k_ar] == 0);
  CHECK(b.tasks_by_kind[k_rs] == 0);
  CHECK(b.tasks_by_kind[k_ar] == a.tasks_by_kind[k_rs]);
  CHECK(b.bytes_by_kind[k_ar] == Approx(a.bytes_by_kind[k_rs]));
  CHECK(b.step_time_s >= a.step_time_s);
}

TEST_CASE("ZeRO-3 at scale is communication-bound on the all-gather, one node is not",
          "[simulate]") {
  // 175B, micro-batch 1 with checkpointing. On one a100 node the gathers (~2.7 x 349 GB at
  // 235 GB/s NVLink, ~4 s) hide under ~180 s of compute; on 1,024 GPUs (128 nodes, NICs at
  // e(128) = 0.59 of 8 x 24 GB/s) a rank computes ~22 s while its gathers need ~8 s at
  // bandwidth plus ~1,060 ring latencies of ~5-7 ms, and they are exposed.
  const models::Model model = models::load_model("175b");
  Workload w{2048, Attention::kSdpa};
  // The kernels' roofline alone: the fitted framework terms (hardware/framework.h) would slow
  // compute by a constant the mechanism under test does not depend on.
  hardware::Profile a100 = hardware::load_profile("a100");
  a100.framework = hardware::FrameworkSpec{};
  a100.gpu.framework_efficiency = 1;
  DsConfig c = config(zero_json(3), 8, model.shape().hidden);
  c.activation_checkpointing.enabled = true;
  const StepResult one = simulate_step(model, hardware::make_cluster(a100, 8, 1), c, w);
  CHECK(one.bound() == "compute-bound");
  DsConfig big = config(zero_json(3), 1024, model.shape().hidden);
  big.activation_checkpointing.enabled = true;
  const StepResult many = simulate_step(model, hardware::make_cluster(a100, 1024, 128), big, w);
  CHECK_THAT(many.bound(),
             Catch::StartsWith("communication-bound: all-gather, bandwidth-dominated"));
  for (const StepResult* r : {&one, &many}) {
    for (int p = 0; p < kNumPathParts; ++p) {
      CHECK(r->critical_latency_s[p] >= 0);
      CHECK(r->critical_latency_s[p] <= r->critical_path_s[p] * (1 + 1e-12));
    }
  }
}

TEST_CASE("the verdict agrees with the compute share as it is printed, in whole percent",
          "[simulate]") {
  // 89.665% prints as "compute 90%", so it is compute-bound; 89.4% prints as 89% and is not.
  std::array<double, kNumPathParts> path{}, latency{};
  path[0] = 89.665;
  path[static_cast<int>(PathPart::kAllGather)] = 10.335;
  CHECK(bound_phrase(path, latency, 100) == "compute-bound");
  CHECK(bound_short(path, latency, 100) == "compute");
  path[0] = 89.4;
  path[static_cast<int>(PathPart::kAllGather)] = 10.6;
  CHECK_THAT(bound_phrase(path, latency, 100),
             Catch::StartsWith("communication-bound: all-gather, bandwidth-dominated (11% of"));
  CHECK(bound_short(path, latency, 100) == "all-gather (bandwidth)");
  // The host floor, when it binds, is named as such, not as the compute it holds up.
  path = {};
  path[0] = 30;
  path[static_cast<int>(PathPart::kHost)] = 70;
  CHECK(bound_phrase(path, latency, 100) ==
        "host-bound: the GPU waits for the Python that issues its kernels (70% of the step)");
  CHECK(bound_short(path, latency, 100) == "host Python");
}

TEST_CASE("the same step is simulated identically, ties shuffled or not", "[simulate]") {
  const models::Model model = models::load_model("llama2-7b");
  for (int stage : {1, 2, 3}) {
    DsConfig c = config(zero_json(stage, R"(, "offload_optimizer": {"device": "cpu"})", 2, 3), 8,
                        4096);
    Workload w{2048, Attention::kSdpa};
    StepResult base = simulate_step(model, ideal_cluster(8), c, w);
    for (uint64_t seed : {1, 7, 42}) {
      SimulateOptions o;
      o.shuffle_seed = seed;
      StepResult r = simulate_step(model, ideal_cluster(8), c, w, o);
      CHECK(r.step_time_s == base.step_time_s);
      CHECK(r.peak_bytes == base.peak_bytes);
    }
  }
}

TEST_CASE("simulating only the distinct micro-steps equals simulating all of them",
          "[simulate]") {
  const models::Model model = models::load_model("1.3b");
  for (int stage = 0; stage <= 3; ++stage) {
    DsConfig c = config(zero_json(stage, "", 1, 5), 8, 2048);
    Workload w{2048, Attention::kSdpa};
    StepResult fast = simulate_step(model, ideal_cluster(8), c, w);
    SimulateOptions every;
    every.every_micro_step = true;
    StepResult all = simulate_step(model, ideal_cluster(8), c, w, every);
    INFO("stage " << stage);
    CHECK(fast.step_time_s == Approx(all.step_time_s).epsilon(1e-12));
    CHECK(fast.peak_bytes == all.peak_bytes);
    CHECK(fast.wire_bytes == Approx(all.wire_bytes).epsilon(1e-12));
  }
}

// Every figure simulate_step reports, compared bit for bit.
void check_same(const StepResult& a, const StepResult& b) {
  CHECK(a.step_time_s == b.step_time_s);
  CHECK(a.micro_step_s == b.micro_step_s);
  CHECK(a.optimizer_step_s == b.optimizer_step_s);
  for (int r = 0; r < kNumResources; ++r) {
    CHECK(a.resources[r].busy_s == b.resources[r].busy_s);
    CHECK(a.resources[r].exposed_s == b.resources[r].exposed_s);
  }
  CHECK(a.critical_path_s == b.critical_path_s);
  CHECK(a.wire_bytes_by_kind == b.wire_bytes_by_kind);
  CHECK(a.peak_bytes == b.peak_bytes);
  for (int t = 0; t < kNumTiers; ++t) CHECK(a.at_peak[t].bytes == b.at_peak[t].bytes);
  CHECK(a.tasks == b.tasks);
  CHECK(a.events == b.events);
}

TEST_CASE("a graph's fingerprint follows its content", "[simulate]") {
  const models::Model model = models::load_model("1.3b");
  const hardware::Cluster cluster = ideal_cluster(8);
  Workload w{2048, Attention::kSdpa};
  auto fingerprint = [&](const DsConfig& c, int micro_step) {
    StepBuilder b(model, cluster, c, w);
    StepGraph g;
    b.build(micro_step, &g, /*finalize=*/false);
    CHECK_FALSE(g.finalized());
    return g.fingerprint();
  };
  const DsConfig base = config(zero_json(3, "", 1, 4), 8, 2048);
  // Built twice: the same. Another micro-batch, bucket or prefetch: different.
  CHECK(fingerprint(base, 1) == fingerprint(base, 1));
  // Stage 3 without offload runs the same tasks in every micro-step, which differ only in the
  // names the simulation does not read: the same. With offload the boundary's copies differ.
  CHECK(fingerprint(base, 1) == fingerprint(base, 3));
  const DsConfig offload =
      config(zero_json(3, R"(, "offload_optimizer": {"device": "cpu"})", 1, 4), 8, 2048);
  CHECK_FALSE(fingerprint(offload, 1) == fingerprint(offload, 3));
  CHECK_FALSE(fingerprint(offload, 0) == fingerprint(offload, 1));
  CHECK_FALSE(fingerprint(base, 1) == fingerprint(config(zero_json(3, "", 2, 4), 8, 2048), 1));
  CHECK_FALSE(
      fingerprint(base, 1) ==
      fingerprint(config(zero_json(3, R"(, "reduce_bucket_size": 1e7)", 1, 4), 8, 2048), 1));
  CHECK_FALSE(
      fingerprint(base, 1) ==
      fingerprint(config(zero_json(3, R"(, "stage3_prefetch_bucket_size": 1e9)", 1, 4), 8, 2048),
                  1));
  // sub_group_size is read by the optimizer step only: the micro-steps are the same graphs.
  CHECK(fingerprint(base, 1) ==
        fingerprint(config(zero_json(3, R"(, "sub_group_size": 1e7)", 1, 4), 8, 2048), 1));
}

TEST_CASE("reusing identical graphs changes no figure", "[simulate]") {
  // Configs in the order a sweep meets them, several of which share micro-step graphs; one
  // workspace that reuses outcomes and one that runs the engine every time agree bit for bit.
  const models::Model model = models::load_model("1.3b");
  const hardware::Cluster cluster = ideal_cluster(8);
  Workload w{2048, Attention::kSdpa};
  const std::vector<std::string> extras = {
      "",
      R"(, "sub_group_size": 1e7)",
      R"(, "stage3_max_live_parameters": 2e9)",
      R"(, "offload_optimizer": {"device": "cpu"})",
      R"(, "offload_optimizer": {"device": "cpu"}, "sub_group_size": 1e7)",
      R"(, "reduce_bucket_size": 1e7)",
  };
  SimWorkspace reusing, plain;
  plain.reuse_outcomes = false;
  for (int stage : {2, 3}) {
    for (const std::string& extra : extras) {
      if (stage == 2 && extra.find("sub_group") != std::string::npos) continue;
      for (int gas : {1, 4}) {
        DsConfig c = config(zero_json(stage, extra, 2, gas), 8, 2 * gas * 8);
        SimulateOptions a, b;
        a.workspace = &reusing;
        b.workspace = &plain;
        INFO("stage " << stage << extra << " gas " << gas);
        const StepResult every = simulate_step(model, cluster, c, w, b);
        check_same(simulate_step(model, cluster, c, w, a), every);
        // A one-off call without a workspace agrees too.
        check_same(simulate_step(model, cluster, c, w), every);
      }
    }
  }
  CHECK(reusing.reused > 0);
  CHECK(plain.reused == 0);
  CHECK(reusing.simulated + reusing.reused == plain.simulated);
}

TEST_CASE("the simulated peak includes allocator fragmentation, fitting needs both views",
          "[simulate]") {
  // README's worked example: 20B, ZeRO-3, micro-batch 2 on 8 A100-80GB. The analytic bound
  // (86.1 GiB) does not fit; neither may simulate_step say it does.
  const models::Model model = models::load_model("20b");
  const hardware::Cluster cluster = hardware::make_cluster(hardware::load_profile("a100"), 8, 1);
  DsConfig c = config(zero_json(3, "", 2, 4), 8, 6144);
  StepResult r = simulate_step(model, cluster, c, Workload{2048, Attention::kSdpa});
  const int gpu = static_cast<int>(Tier::kGpu);
  const MemoryBreakdown& at = r.at_peak[gpu];
  const double frag = cluster.profile.runtime.allocator_fragmentation;
  REQUIRE(frag > 0);
  const double runtime =
      cluster.profile.runtime.cuda_context_bytes + cluster.profile.runtime.nccl_buffer_bytes;
  CHECK(at[Category::kRuntime] ==
        Approx(runtime + frag * (at.total() - at[Category::kRuntime])).epsilon(1e-9));
  CHECK(r.peak_bytes[gpu] == Approx(at.total()).epsilon(1e-12));
  CHECK_FALSE(r.analytic.fit().fits());
  CHECK_FALSE(r.fit.fits());
  // With activation checkpointing both views fit.
  c.activation_checkpointing.enabled = true;
  StepResult ok = simulate_step(model, cluster, c, Workload{2048, Attention::kSdpa});
  CHECK(ok.analytic.fit().fits());
  CHECK(ok.fit.fits());
}

TEST_CASE("a model built outside zero.Init: the run's GPU peak is deepspeed.initialize's",
          "[simulate]") {
  // Llama-2-70B with ZeRO-3 and full CPU offload on 8 A100-80GB fits its step, but a model
  // handed to deepspeed.initialize unpartitioned is moved to the GPU whole first:
  // 2 * 68,976,648,192 bytes = 128.5 GiB in bf16, plus the CUDA context, NCCL buffers and the
  // profile's fragmentation on the 128.5 GiB. The step's figures do not change.
  const models::Model model = models::load_model("llama2-70b");
  const hardware::Cluster cluster = hardware::make_cluster(hardware::load_profile("a100"), 8, 1);
  const DsConfig c = config(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
      "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"},
                            "offload_param": {"device": "cpu"}}})",
                            8, 8192);
  Workload w{1024, Attention::kSdpa};
  const StepResult usual = simulate_step(model, cluster, c, w);
  w.zero_init = false;
  const StepResult outside = simulate_step(model, cluster, c, w);
  const int gpu = static_cast<int>(Tier::kGpu);
  const auto& rt = cluster.profile.runtime;
  const double model_bytes = 2.0 * 68'976'648'192;
  CHECK_FALSE(usual.gpu_peak_at_init);
  CHECK(usual.fit.fits());
  CHECK(outside.gpu_peak_at_init);
  CHECK(outside.peak_bytes[gpu] ==
        Approx(model_bytes * (1 + rt.allocator_fragmentation) + rt.cuda_context_bytes +
               rt.nccl_buffer_bytes)
            .epsilon(1e-12));
  CHECK(outside.at_peak[gpu][Category::kParams16] == model_bytes);
  CHECK_FALSE(outside.fit.fits());
  CHECK(outside.analytic[Tier::kGpu].peak_phase == Phase::kInit);
  CHECK(outside.step_time_s == usual.step_time_s);
}

TEST_CASE("the critical path accounts for the whole step", "[simulate]") {
  const models::Model model = models::load_model("20b");
  DsConfig c = config(zero_json(3, "", 1, 2), 8, 6144);
  StepResult r = simulate_step(model, ideal_cluster(8), c, Workload{2048, Attention::kSdpa});
  double sum = 0;
  for (double s : r.critical_path_s) sum += s;
  CHECK(sum == Approx(r.step_time_s).epsilon(1e-9));
  CHECK_FALSE(r.bottleneck().empty());
}

TEST_CASE("steady memory equals the analytic model, the simulated peak only adds transients",
          "[simulate][memory]") {
  struct Case {
    const char* model;
    int stage;
    const char* extra;
    int gas;
  };
  const Case cases[] = {
      {"1.3b", 0, "", 1},
      {"1.3b", 1, "", 2},
      {"1.3b", 2, "", 4},
      {"1.3b", 2, R"(, "offload_optimizer": {"device": "cpu"})", 2},
      {"llama2-7b", 3, "", 1},
      {"llama2-7b", 3, R"(, "offload_optimizer": {"device": "cpu"})", 2},
      {"llama2-7b", 3,
       R"(, "offload_optimizer": {"device": "nvme", "nvme_path": "/x"},
          "offload_param": {"device": "nvme", "nvme_path": "/x"})",
       1},
  };
  for (const Case& k : cases) {
    const models::Model model = models::load_model(k.model);
    DsConfig c = config(zero_json(k.stage, k.extra, 1, k.gas), 8, model.shape().hidden);
    Workload w{2048, Attention::kSdpa};
    StepResult r = simulate_step(model, ideal_cluster(8), c, w);
    INFO(k.model << " stage " << k.stage << k.extra << " gas " << k.gas);
    const ZeroSizes sizes = zero_sizes(model, 8, c);
    auto analytic = persistent_memory(sizes, ideal_cluster(8), c);
    for (int t = 0; t < kNumTiers; ++t) {
      double scale = t == 0 ? 1.0 : 8.0;
      for (int cat = 0; cat < kNumCategories; ++cat) {
        CHECK(r.steady[t].bytes[cat] == Approx(analytic[t].bytes[cat] * scale));
      }
      // Model states are allocated once and never change within a step.
      for (Category fixed : {Category::kParams16, Category::kMaster32,
                             Category::kOptimizerStates, Category::kSwapBuffers}) {
        CHECK(r.at_peak[t][fixed] == Approx(r.steady[t][fixed]));
      }
      CHECK(r.peak_bytes[t] >= r.steady[t].total() * (1 - 1e-12));
    }
    // The two views of the GPU peak agree closely: they count the same buffers, the simulator at
    // the moments its schedule puts them together.
    double sim_gpu = r.peak_bytes[0];
    double ana_gpu = r.analytic[Tier::kGpu].peak_bytes;
    CHECK(sim_gpu == Approx(ana_gpu).epsilon(0.15));
  }
}

}  // namespace
}  // namespace zplan::sim
