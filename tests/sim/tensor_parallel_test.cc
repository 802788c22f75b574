// AutoTP training (issue 16 item 3, docs/cost_model.md "AutoTP tensor parallelism"): the
// tensor_parallel block in the batch keys, the refusals, ZeRO over the data-parallel group, the
// all-reduces of the split linears, and the verdict AutoTP can flip.
#include <algorithm>

#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "hardware/cost_model.h"
#include "models/catalog.h"
#include "models/tensor_parallel.h"
#include "sim/memory_model.h"
#include "sim/step_builder.h"
#include "sim/step_costs.h"
#include "sim/tensor_parallel.h"
#include "tests/sim/sim_test_util.h"

namespace zplan::sim {
namespace {

using Catch::Matchers::Contains;
using testing::config;

std::string config_error(const std::string& json, int gpus = 8) {
  try {
    config(json, gpus);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

Workload autotp(int64_t seq, int tp) {
  Workload w{seq, Attention::kFlash2};
  w.tensor_parallel = tp;
  return w;
}

TEST_CASE("autotp_size shrinks the data-parallel ranks the batch keys count", "[sim]") {
  const DsConfig c = config(R"({"train_micro_batch_size_per_gpu": 2,
                                "gradient_accumulation_steps": 3,
                                "tensor_parallel": {"autotp_size": 4}})",
                            8);
  CHECK(autotp_size(c) == 4);
  CHECK_FALSE(autotp_overlap_comm(c));
  CHECK(c.train_batch_size == 2 * 3 * 2);  // 8 GPUs / AutoTP 4 = 2 data-parallel ranks
  // 0 and 1 are off (engine.py: AutoTP only above 1).
  for (int tp : {0, 1}) {
    CHECK(autotp_size(config(R"({"train_micro_batch_size_per_gpu": 1,
                                 "tensor_parallel": {"autotp_size": )" +
                                 std::to_string(tp) + "}}",
                             8)) == 1);
  }
  // A file may count every GPU, as DeepSpeed's batch check does without an mpu (HF Trainer):
  // 2 x 3 x 8 = 48 is read as the 12 samples a step trains.
  std::vector<std::string> notes;
  ParseContext ctx;
  ctx.dp_world_size = 8;
  ctx.notes = &notes;
  const DsConfig world = parse_ds_config(
      nlohmann::json::parse(R"({"train_batch_size": 48, "train_micro_batch_size_per_gpu": 2,
                                "gradient_accumulation_steps": 3,
                                "tensor_parallel": {"autotp_size": 4, "tp_overlap_comm": true}})"),
      "t.json", ctx);
  CHECK(world.train_batch_size == 12);
  CHECK(autotp_overlap_comm(world));
  CAPTURE(notes);
  CHECK(std::count_if(notes.begin(), notes.end(), [](const std::string& n) {
          return n.find("train_batch_size 48 counts all 8 GPUs") != std::string::npos;
        }) == 1);
  // The same 12, counted over the 2 data-parallel ranks (DeepSpeed with an mpu), reads alike;
  // the writer gives DeepSpeed's count over every GPU, which reads back the same.
  CHECK(config(R"({"train_batch_size": 12, "train_micro_batch_size_per_gpu": 2,
                   "gradient_accumulation_steps": 3, "tensor_parallel": {"autotp_size": 4}})",
               8)
            .train_batch_size == 12);
  const nlohmann::json written = ds_config_to_json(world);
  CHECK(written["train_batch_size"] == 48);
  CHECK(written["tensor_parallel"]["autotp_size"] == 4);
  CHECK(config(written.dump(), 8).train_batch_size == 12);
  CHECK_THAT(config_error(R"({"train_batch_size": 20, "train_micro_batch_size_per_gpu": 2,
                              "gradient_accumulation_steps": 3,
                              "tensor_parallel": {"autotp_size": 4}})"),
             Contains("x 2 data-parallel GPUs"));
}

TEST_CASE("the tensor_parallel block: what DeepSpeed refuses and what zplan does not model",
          "[sim]") {
  const std::string micro = R"("train_micro_batch_size_per_gpu": 1, )";
  auto error = [&](const std::string& block) {
    return config_error("{" + micro + R"("tensor_parallel": )" + block + "}");
  };
  CHECK_THAT(error(R"({"autotp_size": 3})"),
             Contains("test: /tensor_parallel/autotp_size: AutoTP size 3 does not divide the 8 "
                      "GPUs"));
  CHECK_THAT(error(R"({"autotp_size": 4, "tp": {"tp_size": 2}})"),
             Contains("/tensor_parallel/tp/tp_size: is 2 but autotp_size is 4"));
  CHECK(error(R"({"autotp_size": 4, "tp": {"tp_size": 4}, "keep_module_on_host": true})")
            .empty());
  CHECK_THAT(error(R"({"autotp_size": 4, "preset_model": "llama"})"),
             Contains("/tensor_parallel/preset_model: not modelled: AutoTP partition rules"));
  CHECK_THAT(error(R"({"autotp_size": 4, "partition_config": {"layer_specs": []}})"),
             Contains("/tensor_parallel/partition_config: not modelled"));
  CHECK_THAT(error(R"({"autotp_size": 4, "autotp": 2})"), Contains("autotp"));
  CHECK_THAT(config_error("{" + micro +
                          R"("sequence_parallel_size": 2, "tensor_parallel": {"autotp_size": 2}})"),
             Contains("not modelled: AutoTP together with Ulysses"));
}

TEST_CASE("AutoTP groups stay inside a node, without ZeRO++ or MiCS", "[sim]") {
  const models::Model llama = models::load_model("llama3-8b");
  auto error = [&](const DsConfig& c, int tp, const hardware::Cluster& cl) {
    try {
      check_tensor_parallel(llama, c, autotp(4096, tp), cl, "where");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const DsConfig plain = config(R"({"train_micro_batch_size_per_gpu": 1})", 16);
  const hardware::Cluster two = testing::ideal_cluster(16, 2);
  CHECK(error(plain, 8, two).empty());
  CHECK_THAT(error(plain, 16, two), Contains("where: not modelled: AutoTP groups of 16 GPUs"));
  const DsConfig hpz = config(R"({"train_micro_batch_size_per_gpu": 1,
                                  "zero_optimization": {"stage": 3,
                                                        "zero_hpz_partition_size": 8}})",
                              16);
  CHECK_THAT(error(hpz, 2, two), Contains("not modelled: AutoTP with ZeRO++ or MiCS"));
}

// Llama-3-8B at AutoTP 4 on 8 GPUs of the ideal profile: 2 data-parallel ranks.
struct Tp4 {
  models::Model whole = models::load_model("llama3-8b");
  models::Model shard = models::tensor_parallel_shard(whole, 4);
  hardware::Cluster cluster = testing::ideal_cluster(8);

  DsConfig ds(int stage, bool checkpointing = false) const {
    // An activation_checkpointing block turns checkpointing on (DsConfig).
    return config(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
                      "tensor_parallel": {"autotp_size": 4}, )" +
                      std::string(checkpointing ? R"("activation_checkpointing": {}, )" : "") +
                      R"("zero_optimization": {"stage": )" + std::to_string(stage) + "}}",
                  8, 4096);
  }
};

TEST_CASE("ZeRO partitions the shard over the GPUs / tp", "[sim]") {
  Tp4 t;
  const Workload w = autotp(4096, 4);
  CHECK(data_parallel_ranks(t.cluster, w) == 2);
  CHECK(data_parallel_group(t.cluster, w).ranks == 2);
  CHECK(tensor_parallel_group(w).ranks == 4);
  CHECK(tensor_parallel_group(w).nodes == 1);
  // Stage 2 over 2 ranks: each keeps half of the shard's fp32 master and Adam states (12 bytes
  // per element) and its whole 16-bit shard: 2,795,769,856 elements per GPU.
  const MemoryReport m = analyze_memory(t.shard, t.cluster, t.ds(2), w);
  const MemoryBreakdown& g = m[Tier::kGpu].at_peak;
  CHECK(g[Category::kParams16] == Approx(2.0 * 2795769856).epsilon(1e-6));
  CHECK(g[Category::kMaster32] + g[Category::kOptimizerStates] ==
        Approx(12.0 * 2795769856 / 2).epsilon(1e-6));
  const StepBuilder b(t.shard, t.cluster, t.ds(2), w);
  CHECK(b.sizes().dp == 2);
  // Stage 2's gradient all-reduces run in the 2-rank group: each sends 2 (n-1)/n = 1x the bucket.
  StepGraph graph;
  b.build(0, &graph);
  double reduced = 0;
  int all_reduces = 0;
  for (const Task& task : graph.tasks()) {
    if (task.kind != TaskKind::kAllReduce) continue;
    ++all_reduces;
    reduced += task.bytes;
    CHECK(task.wire_bytes == Approx(task.bytes));
  }
  CHECK(all_reduces > 0);
  CHECK(reduced == Approx(2.0 * 2795769856));  // every bf16 gradient of the shard, once
}

TEST_CASE("the AutoTP all-reduces of one micro-step, by hand", "[sim]") {
  Tp4 t;
  const Workload w = autotp(4096, 4);
  // Per block: forward, o_proj's and down_proj's outputs (LinearAllreduce); backward, the input
  // gradients of q, k, v, gate and up (LinearLayer). Each is a [4096 tokens x 4096] bf16 tensor:
  // 33,554,432 bytes. 32 blocks: 64 forward, 160 backward; full checkpointing recomputes the 64.
  const TensorParallelTraffic plain =
      tensor_parallel_traffic(t.shard, t.ds(2), w, std::vector<bool>());
  CHECK(plain.forward_count == 64);
  CHECK(plain.forward_bytes == 64 * 33554432.0);
  CHECK(plain.backward_count == 160);
  CHECK(plain.backward_bytes == 160 * 33554432.0);
  CHECK(plain.recompute_count == 0);
  const ActivationPlan acts = plan_activations(t.shard, t.ds(2, true), w);
  const TensorParallelTraffic ckpt = tensor_parallel_traffic(t.shard, t.ds(2, true), w,
                                                             acts.checkpointed);
  CHECK(ckpt.recompute_count == 64);
  CHECK(ckpt.recompute_bytes == ckpt.forward_bytes);
  CHECK(tensor_parallel_traffic(t.whole, t.ds(2), Workload{}, {}).forward_count == 0);

  // Their time on the compute path: each an all-reduce of 32 MiB in the 4-rank group.
  const DsConfig c = t.ds(2);
  const ZeroSizes sizes = zero_sizes(t.shard, 2, c);
  const std::vector<Piece> pieces = plan_pieces(t.shard, t.cluster.profile, c, w, sizes);
  std::vector<Piece> with = pieces;
  add_tensor_parallel_all_reduces(with, t.shard, t.cluster, c, w);
  const double ar = group_collective_cost(t.cluster, hardware::Collective::kAllReduce, 33554432.0,
                                          CommGroup{4, 1})
                        .total_s();
  CHECK(ar > 0);
  double fwd = 0, bwd = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    fwd += with[i].fwd_s - pieces[i].fwd_s;
    bwd += with[i].bwd_s - pieces[i].bwd_s;
  }
  CHECK(fwd == Approx(64 * ar));
  CHECK(bwd == Approx(160 * ar));
  // tp_overlap_comm: a column linear's all-reduce shows only where it outlasts its grad_weight
  // GEMM (k x n over the 4096 rows; at 100 TFLOP/s in the ideal profile).
  Workload overlap = w;
  overlap.tp_overlap_comm = true;
  std::vector<Piece> hidden = pieces;
  add_tensor_parallel_all_reduces(hidden, t.shard, t.cluster, c, overlap);
  double expected = 0;
  for (const models::ComputeOp& op : t.shard.layers()[1].ops) {
    if (op.tp != models::TpSplit::kColumn) continue;
    const double dw = hardware::gemm_time_s(t.cluster.profile.gpu, static_cast<double>(op.k),
                                            static_cast<double>(op.n), 4096, 2);
    expected += std::max(0.0, ar - dw);
  }
  double bwd_overlap = 0;
  for (size_t i = 0; i < pieces.size(); ++i) bwd_overlap += hidden[i].bwd_s - pieces[i].bwd_s;
  CHECK(bwd_overlap == Approx(32 * expected).margin(1e-12));
  CHECK(bwd_overlap < bwd);
}

TEST_CASE("AutoTP divides the model FLOPs per GPU by tp", "[sim]") {
  Tp4 t;
  const DsConfig one = config(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
                                  "zero_optimization": {"stage": 2}})",
                              8, 4096);
  const StepBuilder b1(t.whole, t.cluster, one, Workload{4096, Attention::kFlash2});
  const StepBuilder b4(t.shard, t.cluster, t.ds(2), autotp(4096, 4));
  CHECK(b4.model_flops_per_micro_step() == Approx(b1.model_flops_per_micro_step() / 4));
  // The LM head runs whole on every rank: 3 x 2 T h V of hardware FLOPs not divided.
  const double head = 3 * 2.0 * 4096 * 4096 * 128256;
  CHECK(b4.hardware_flops_per_micro_step() ==
        Approx((b1.hardware_flops_per_micro_step() - head) / 4 + head));
}

TEST_CASE("AutoTP fits Llama-2-70B on one node where plain ZeRO-2 does not", "[sim]") {
  // 8 x H100 80 GB, ZeRO-2 with the optimizer on the CPU, bf16, seq 4096, micro-batch 1, full
  // checkpointing (docs/cost_model.md §16 has the command). Plain data parallelism keeps the
  // whole 16-bit model on every GPU (2 x 69B bytes = 129 GiB); AutoTP 8 keeps 1/8 of each block.
  const models::Model whole = models::load_model("llama2-70b");
  const hardware::Cluster node = hardware::make_cluster(hardware::load_profile("h100"), 8, 1);
  auto fits = [&](int tp) {
    const DsConfig c = config(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
                                  "activation_checkpointing": {"enabled": true},
                                  "tensor_parallel": {"autotp_size": )" +
                                  std::to_string(tp) + R"(},
                                  "zero_optimization": {"stage": 2,
                                    "offload_optimizer": {"device": "cpu"}}})",
                              8, 8192);
    const models::Model m = tp > 1 ? models::tensor_parallel_shard(whole, tp) : whole;
    return analyze_memory(m, node, c, autotp(4096, tp)).fit(0.05).fits();
  };
  CHECK_FALSE(fits(1));
  CHECK(fits(8));
}

}  // namespace
}  // namespace zplan::sim
