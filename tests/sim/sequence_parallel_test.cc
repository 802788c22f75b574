// Ulysses sequence parallelism (issue 16 item 3, docs/cost_model.md "Ulysses sequence
// parallelism"): the ds_config's sequence_parallel_size in the batch keys, the checks DeepSpeed
// makes, the per-rank memory and FLOPs and the all-to-alls around attention.
#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "hardware/cost_model.h"
#include "models/catalog.h"
#include "sim/memory_model.h"
#include "sim/sequence_parallel.h"
#include "sim/step_builder.h"
#include "sim/step_costs.h"
#include "tests/sim/sim_test_util.h"

namespace zplan::sim {
namespace {

using Catch::Matchers::Contains;
using testing::config;

std::string check_error(const models::Model& model, const Workload& w,
                        const hardware::Cluster& cluster) {
  try {
    check_sequence_parallel(model, w, cluster, "ds.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

Workload ulysses(int64_t seq, int sp) {
  Workload w{seq, Attention::kFlash2};
  w.sequence_parallel = sp;
  return w;
}

TEST_CASE("sequence_parallel_size shrinks the data-parallel group of the batch keys", "[sim]") {
  // runtime/config.py: world_size = dist.get_world_size() / config["sequence_parallel_size"].
  const DsConfig c = config(
      R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3,
          "sequence_parallel_size": 4, "zero_optimization": {"stage": 3}})",
      8);
  CHECK(sequence_parallel_size(c) == 4);
  CHECK(c.train_batch_size == 2 * 3 * 2);  // 8 GPUs / sp 4 = 2 data-parallel ranks
  CHECK(sequence_parallel_size(config(R"({"train_micro_batch_size_per_gpu": 1})", 8)) == 1);
  auto error = [](const std::string& json) {
    try {
      config(json, 8);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // DeepSpeed derives the accumulation from train / micro / (GPUs / sp): 8 / 1 / 2.
  CHECK(config(R"({"train_micro_batch_size_per_gpu": 1, "train_batch_size": 8,
                   "sequence_parallel_size": 4})",
               8)
            .gradient_accumulation_steps == 4);
  CHECK_THAT(error(R"({"train_micro_batch_size_per_gpu": 1, "train_batch_size": 8,
                       "gradient_accumulation_steps": 1, "sequence_parallel_size": 4})"),
             Contains("2 data-parallel GPUs"));
  CHECK_THAT(error(R"({"train_micro_batch_size_per_gpu": 1, "sequence_parallel_size": 3})"),
             Contains("test: /sequence_parallel_size: Ulysses sequence parallel size 3 does not "
                      "divide the 8 GPUs"));
  CHECK_THAT(error(R"({"train_micro_batch_size_per_gpu": 1, "sequence_parallel_size": 0})"),
             Contains("/sequence_parallel_size: must be at least 1"));
}

TEST_CASE("Ulysses refuses what DeepSpeed raises on", "[sim]") {
  const models::Model llama = models::load_model("llama3-8b");  // 32 heads, 8 kv heads
  const hardware::Cluster node = hardware::make_cluster(hardware::load_profile("h100"), 8, 1);
  CHECK(check_error(llama, ulysses(8192, 8), node).empty());
  CHECK(check_error(llama, ulysses(8192, 1), node).empty());
  // sp 16 > 8 kv heads: UlyssesSPAttentionHF repeats each kv head twice, allowed.
  const hardware::Cluster two = hardware::make_cluster(hardware::load_profile("h100"), 16, 2);
  CHECK(check_error(llama, ulysses(8192, 16), two).empty());
  const hardware::Cluster big = hardware::make_cluster(hardware::load_profile("h100"), 64, 8);
  CHECK_THAT(check_error(llama, ulysses(8192, 64), big),
             Contains("ds.json: /sequence_parallel_size: Ulysses sequence parallel size 64 does "
                      "not divide the model's 32 attention heads"));
  CHECK_THAT(check_error(llama, ulysses(8190, 4), node),
             Contains("does not divide the 8190-token sequence"));
  // Qwen2-7B's shape: 28 heads, 4 kv heads; sp 7 divides the heads but not the kv heads (nor
  // they it).
  const models::Model qwen = models::model_from_hf_config(
      {{"model_type", "llama"}, {"hidden_size", 3584}, {"num_attention_heads", 28},
       {"num_key_value_heads", 4}, {"intermediate_size", 18944}, {"num_hidden_layers", 2},
       {"vocab_size", 1000}},
      "qwen.json");
  const hardware::Cluster seven = hardware::make_cluster(hardware::load_profile("h100"), 7, 1);
  CHECK_THAT(check_error(qwen, ulysses(7 * 1024, 7), seven),
             Contains("7 and the model's 4 key/value heads do not divide one another"));
  // Groups of 4 consecutive ranks on 6-GPU nodes would straddle nodes.
  const hardware::Cluster six = hardware::make_cluster(hardware::load_profile("h100"), 12, 2);
  CHECK_THAT(check_error(llama, ulysses(8192, 4), six), Contains("split nodes of 6 GPUs"));
}

TEST_CASE("the all-to-all bytes of one layer, by hand", "[sim]") {
  const models::Model llama = models::load_model("llama3-8b");
  // s = 131072 over sp = 8: 16384 local tokens, b = 1, bf16, head_dim 128.
  // q: 16384 x 32 heads x 128 x 2 B = 134,217,728 B; k and v: 16384 x 8 x 128 x 2 = 33,554,432 B
  // each; the output back: 16384 x 32 x 128 x 2 = 134,217,728 B. Forward 335,544,320 B (320
  // MiB) per rank per layer, backward the same again.
  const UlyssesAllToAll a = ulysses_all_to_all_bytes(llama.shape(), 16384, 2, 8);
  CHECK(a.q_bytes == 134217728.0);
  CHECK(a.kv_bytes == 33554432.0);
  CHECK(a.out_bytes == 134217728.0);
  CHECK(a.forward_total() == 335544320.0);
  // sp 16 > 8 kv heads: k and v are repeated to 16 heads before the all-to-all.
  CHECK(ulysses_all_to_all_bytes(llama.shape(), 8192, 2, 16).kv_bytes == 8192.0 * 16 * 128 * 2);
}

// Llama-3-8B, ZeRO-3 on 8 x H100, bf16, flash_attention_2, Liger's fused loss, full checkpointing.
struct Alst {
  models::Model model = models::load_model("llama3-8b");
  hardware::Cluster cluster = hardware::make_cluster(hardware::load_profile("h100"), 8, 1);

  DsConfig ds(int sp) const {
    return config(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
                      "zero_optimization": {"stage": 3},
                      "activation_checkpointing": {"enabled": true},
                      "sequence_parallel_size": )" +
                      std::to_string(sp) + "}",
                  8, 4096);
  }
  MemoryReport memory(int64_t seq, int sp) const {
    Workload w = ulysses(seq, sp);
    w.fused_loss = w.fused_swiglu = true;
    return analyze_memory(model, cluster, ds(sp), w);
  }
};

TEST_CASE("Ulysses holds 1/sp of the activations, and fits 128k+ tokens on 8 GPUs", "[sim]") {
  Alst a;
  // ArcticTraining's ALST (arctic_training, Llama-8B on 8 H100) trains far past 128k tokens per
  // sequence with Ulysses over the 8 GPUs; without it the sequence's activations do not fit.
  for (int64_t seq : {131072, 262144}) {
    CAPTURE(seq);
    const MemoryReport one = a.memory(seq, 1);
    const MemoryReport eight = a.memory(seq, 8);
    CHECK_FALSE(one.fit().gpu_fits());
    CHECK(eight.fit().gpu_fits());
  }
  const MemoryReport one = a.memory(65536, 1), four = a.memory(65536, 4);
  CHECK(four[Tier::kGpu].peak_bytes < one[Tier::kGpu].peak_bytes);
  // The checkpoints are the 32 blocks' inputs, s/sp tokens each: 2 x 65536/4 x 4096 bytes.
  Workload w4 = ulysses(65536, 4);
  w4.fused_loss = w4.fused_swiglu = true;
  const ActivationPlan acts = plan_activations(a.model, a.ds(4), w4);
  double kept = 0;
  for (size_t i = 0; i < a.model.layers().size(); ++i) {
    if (acts.checkpointed[i]) kept += acts.kept[i];
  }
  CHECK(kept == 32 * 2 * (65536.0 / 4) * 4096);
}

TEST_CASE("eager attention's scores are heads/sp over the whole sequence", "[sim]") {
  const models::Model llama = models::load_model("llama3-8b");
  models::ActivationOptions o;
  o.flash_attention = false;
  const models::LayerActivations full = llama.layer_activations(1, 4096, 1, o);
  o.sequence_parallel = 4;
  const models::LayerActivations quarter = llama.layer_activations(1, 1024, 1, o);
  models::ActivationOptions plain;
  plain.flash_attention = false;
  const models::LayerActivations local = llama.layer_activations(1, 1024, 1, plain);
  // The s^2 part (6 bytes a score: fp32 softmax + its bf16 copy) is a quarter of the full one.
  const double scores_full = 32.0 * 4096 * 4096, scores_sp = scores_full / 4;
  CHECK(quarter.stored_bytes - local.stored_bytes == Approx(6 * (scores_sp - scores_sp / 4)));
  CHECK(full.stored_bytes == Approx(4 * quarter.stored_bytes));
}

TEST_CASE("Ulysses divides the FLOPs by sp and puts the all-to-alls on the compute path",
          "[sim]") {
  Alst a;
  const int64_t seq = 32768;
  Workload one = ulysses(seq, 1), eight = ulysses(seq, 8);
  const StepBuilder b1(a.model, a.cluster, a.ds(1), one);
  const StepBuilder b8(a.model, a.cluster, a.ds(8), eight);
  CHECK(b8.model_flops_per_micro_step() == Approx(b1.model_flops_per_micro_step() / 8));
  CHECK(b8.hardware_flops_per_micro_step() == Approx(b1.hardware_flops_per_micro_step() / 8));
  // A block's attention piece: its compute at sp 8, plus the four all-to-alls each way.
  const DsConfig c8 = a.ds(8);
  const ZeroSizes sizes = zero_sizes(a.model, 8, c8);
  std::vector<Piece> pieces = plan_pieces(a.model, a.cluster.profile, c8, eight, sizes);
  std::vector<Piece> with = pieces;
  add_ulysses_all_to_all(with, a.model, a.cluster, eight, c8);
  const UlyssesAllToAll bytes = ulysses_all_to_all_bytes(a.model.shape(), seq / 8.0, 2, 8);
  const CommGroup group = sequence_parallel_group(8, a.cluster);
  CHECK(group.nodes == 1);
  auto cost = [&](double b) { return group_all_to_all_cost(a.cluster, b, group).total_s(); };
  const double a2a = cost(bytes.q_bytes) + 2 * cost(bytes.kv_bytes) + cost(bytes.out_bytes);
  double added_fwd = 0, added_bwd = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    added_fwd += with[i].fwd_s - pieces[i].fwd_s;
    added_bwd += with[i].bwd_s - pieces[i].bwd_s;
  }
  CHECK(a2a > 0);
  CHECK(added_fwd == Approx(32 * a2a));  // one attention per block, 32 blocks
  CHECK(added_bwd == Approx(32 * a2a));
}

}  // namespace
}  // namespace zplan::sim
