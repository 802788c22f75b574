// The workload's memory tricks (issue 16): the attention implementation, the fused loss and
// cpu_checkpointing, each in the memory model and the step graph, each with a case where it turns
// the verdict (docs/models.md, docs/cost_model.md "Attention, loss kernel and cpu_checkpointing").
#include <catch2/catch.hpp>

#include "hardware/cost_model.h"
#include "models/catalog.h"
#include "sim/memory_model.h"
#include "sim/step_builder.h"
#include "sim/step_costs.h"
#include "tests/sim/sim_test_util.h"

namespace zplan::sim {
namespace {

using testing::config;

// Llama-3-8B, ZeRO-3 on 8 x A100-80GB, micro-batch 1: the docs' cases.
struct Llama8b {
  models::Model model = models::load_model("llama3-8b");
  hardware::Cluster cluster = hardware::make_cluster(hardware::load_profile("a100"), 8, 1);

  MemoryReport memory(const std::string& checkpointing, const Workload& w) const {
    // An activation_checkpointing block, even empty, turns checkpointing on (zero_config.h).
    const std::string json =
        R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
            "zero_optimization": {"stage": 3})" +
        (checkpointing.empty() ? std::string()
                               : ", \"activation_checkpointing\": " + checkpointing) +
        "}";
    return analyze_memory(model, cluster, config(json, 8, 4096), w);
  }
};

const char* const kNoCkpt = "";
const char* const kFull = R"({"enabled": true})";
const char* const kCpu = R"({"enabled": true, "cpu_checkpointing": true})";

TEST_CASE("eager attention OOMs where sdpa fits (llama3-8b, seq 4096)", "[sim]") {
  Llama8b l;
  const MemoryReport sdpa = l.memory(kNoCkpt, Workload{4096, Attention::kSdpa});
  const MemoryReport eager = l.memory(kNoCkpt, Workload{4096, Attention::kEager});
  CHECK(sdpa.fit().gpu_fits());
  CHECK_FALSE(eager.fit().gpu_fits());
  // flash_attention_2/3 keep the same statistics as sdpa.
  CHECK(l.memory(kNoCkpt, Workload{4096, Attention::kFlash2})[Tier::kGpu].peak_bytes ==
        sdpa[Tier::kGpu].peak_bytes);
  // At least the 32 blocks' 6*a*s^2*b - 4*a*s*b (fp32 + bf16 probabilities, a = 32) more.
  const double s = 4096, a = 32;
  CHECK(eager[Tier::kGpu].peak_bytes - sdpa[Tier::kGpu].peak_bytes >
        32 * (6 * a * s * s - 4 * a * s));
}

TEST_CASE("a fused linear + cross-entropy fits where the standard loss OOMs", "[sim]") {
  Llama8b l;
  Workload standard{32768, Attention::kSdpa};
  Workload fused = standard;
  fused.fused_loss = true;
  const MemoryReport a = l.memory(kFull, standard);
  const MemoryReport b = l.memory(kFull, fused);
  CHECK_FALSE(a.fit().gpu_fits());
  CHECK(b.fit().gpu_fits());
  // The LM head's own figures (models/activations.cc): V = 128256, e = h = 4096, T = 32768.
  const double T = 32768, V = 128256, h = 4096;
  models::ActivationOptions o;
  o.fused_loss = true;
  const size_t head = l.model.layers().size() - 1;
  const models::LayerActivations act = l.model.layer_activations(head, 32768, 1, o);
  CHECK(act.stored_bytes == 2 * T * h + 2 * V * h);
  CHECK(act.workspace_bytes == 4 * T * h);
  o.fused_loss = false;
  const models::LayerActivations std_act = l.model.layer_activations(head, 32768, 1, o);
  CHECK(std_act.stored_bytes == 2 * T * h + 4 * T * V + 8 * T);
}

TEST_CASE("cpu_checkpointing fits where GPU checkpoints OOM, and the host holds them", "[sim]") {
  Llama8b l;
  Workload w{131072, Attention::kSdpa};
  w.fused_loss = true;
  const MemoryReport gpu = l.memory(kFull, w);
  const MemoryReport cpu = l.memory(kCpu, w);
  CHECK_FALSE(gpu.fit().gpu_fits());
  CHECK(cpu.fit().fits());
  // 32 block checkpoints of 2*s*h bytes move to host memory, per rank, 8 ranks on the node.
  const double ckpt = 32 * 2 * 131072.0 * 4096;
  CHECK(cpu[Tier::kHost].at_peak[Category::kCheckpoints] >= 8 * (ckpt - 2 * 131072.0 * 4096));
}

TEST_CASE("cpu_checkpointing copies each checkpoint out in forward and back before recompute",
          "[sim]") {
  const models::Model model = models::load_model("125m");
  const hardware::Cluster cluster = testing::ideal_cluster(2);
  const DsConfig c = config(
      R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2},
          "activation_checkpointing": {"enabled": true, "cpu_checkpointing": true}})",
      2, 768);
  const Workload w{1024, Attention::kSdpa};
  StepBuilder builder(model, cluster, c, w);
  StepGraph g;
  builder.build(0, &g);
  double d2h = 0, h2d = 0, kept = 0;
  for (size_t i = 0; i < model.layers().size(); ++i) {
    if (builder.activations().checkpointed[i]) kept += builder.activations().kept[i];
  }
  for (const Task& t : g.tasks()) {
    if (t.kind == TaskKind::kD2H) d2h += t.bytes;
    if (t.kind == TaskKind::kH2D) h2d += t.bytes;
  }
  // 12 blocks' inputs, D*s*b*h bytes each (fp32: no bf16 block), out and back: nothing else
  // moves at stage 2.
  CHECK(kept == 12 * 4 * 1024.0 * 2 * 768);
  CHECK(d2h == kept);
  CHECK(h2d == kept);
}

TEST_CASE("a grouped GEMM is one launch on Hopper, one per group before it", "[sim]") {
  // transformers 5's Mixtral: two torch._grouped_mm over the 8 experts in each block. PyTorch's
  // one-kernel path needs sm90+; A100 runs its fallback, an mm per group.
  const models::Model model = models::load_model(
      std::string(ZPLAN_SOURCE_DIR) + "/examples/hf/Mixtral-8x7B-v0.1.json", 5);
  hardware::Profile prof = hardware::load_profile("a100");
  const DsConfig c = config(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}})",
                            1, 1024);
  const ZeroSizes sizes = zero_sizes(model, 1, c);
  auto gpu_fwd = [&] {
    const Piece p = plan_pieces(model, prof, c, Workload{1024, Attention::kSdpa}, sizes)[1];
    return p.fwd_s - p.fwd_host_s;
  };
  const double looped = gpu_fwd();
  prof.gpu.arch = hardware::Arch::kHopper;
  const double grouped = gpu_fwd();
  // Two grouped GEMMs forward, 7 launches saved by each, through the framework efficiency.
  CHECK(looped - grouped ==
        Approx(2 * 7 * prof.gpu.kernel_launch_s / prof.gpu.framework_efficiency));
}

TEST_CASE("fused causal attention executes half the s^2 products, eager all, plus softmax",
          "[sim]") {
  const models::Model model = models::load_model("llama3-8b");
  const hardware::Profile prof = hardware::load_profile("a100");
  const hardware::GpuSpec& gpu = prof.gpu;
  const DsConfig c = config(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}})",
                            1, 4096);
  const ZeroSizes sizes = zero_sizes(model, 1, c);
  const double s = 4096, a = 32, d = 128;
  auto block = [&](Attention att) {
    return plan_pieces(model, prof, c, Workload{4096, att}, sizes)[1];
  };
  const Piece sdpa = block(Attention::kSdpa), eager = block(Attention::kEager);
  const Piece flash3 = block(Attention::kFlash3);
  CHECK(flash3.fwd_s == sdpa.fwd_s);
  // Model FLOPs are the same (Megatron's count, mask not discounted).
  CHECK(sdpa.fwd_flops == eager.fwd_flops);
  const double F = 4 * s * s * a * d;  // QK^T and PV, b = 1
  const double fused_fwd = hardware::attention_time_s(gpu, kCausalFraction * F, 2);
  const double fused_bwd = hardware::attention_time_s(gpu, 2.5 * kCausalFraction * F, 2);
  const double rows = a * s;
  REQUIRE(model.shape().eager_softmax_upcast());
  REQUIRE_FALSE(model.shape().attention_probs_dropout());
  const EagerSoftmaxBytes e = eager_softmax_bytes(2, true, false);
  const double eager_fwd = hardware::gemm_time_s(gpu, rows, s, d, 2) +
                           hardware::gemm_time_s(gpu, rows, d, s, 2) +
                           hardware::memory_bound_time_s(gpu, e.forward * rows * s);
  const double eager_bwd =
      2 * (eager_fwd - hardware::memory_bound_time_s(gpu, e.forward * rows * s)) +
      hardware::memory_bound_time_s(gpu, e.backward * rows * s);
  // framework_efficiency divides the eager kernels, not the one fused attention kernel.
  const double eff = gpu.framework_efficiency;
  REQUIRE(eff < 1);
  CHECK(eager.fwd_s - sdpa.fwd_s == Approx(eager_fwd / eff - fused_fwd).epsilon(1e-9));
  CHECK(eager.bwd_s - sdpa.bwd_s == Approx(eager_bwd / eff - fused_bwd).epsilon(1e-9));
  // bf16: 5*2 + 8 + 2*6 = 30 bytes forward, 12 + 12 + 4 = 28 backward per score element.
  CHECK(e.forward == 30);
  CHECK(e.backward == 28);
}

TEST_CASE("GPT-2's eager attention softmaxes in the compute dtype, with a dropout pass",
          "[sim]") {
  // The 125m preset is GPT-family (GPT2Attention._attn): scale, causal where, mask add, softmax
  // in fp16, attention dropout p = 0.1. fp16: forward 8 * 2 + (2 * 2 + 1) = 21 bytes per score,
  // backward 7 * 2 + 5 = 19; against Llama's upcast path, 30 and 28 (+ 5 each with dropout).
  const models::Model model = models::load_model("125m");
  REQUIRE_FALSE(model.shape().eager_softmax_upcast());
  REQUIRE(model.shape().attention_probs_dropout());
  const EagerSoftmaxBytes e = eager_softmax_bytes(2, false, true);
  CHECK(e.forward == 21);
  CHECK(e.backward == 19);
  const EagerSoftmaxBytes up = eager_softmax_bytes(2, true, true);
  CHECK(up.forward == 35);
  CHECK(up.backward == 33);
  // fp32: no cast passes; 8 * 4 + 9 = 41 and 7 * 4 + 9 = 37 for GPT-2.
  CHECK(eager_softmax_bytes(4, false, true).forward == 41);
  CHECK(eager_softmax_bytes(4, false, true).backward == 37);

  // The block's eager time over its sdpa time is the two batched GEMMs plus these passes.
  const hardware::Profile prof = hardware::load_profile("v100");
  const hardware::GpuSpec& gpu = prof.gpu;
  const double s = 1024, a = 12, d = 64, b = 8;
  const DsConfig c = config(R"({"train_micro_batch_size_per_gpu": 8, "fp16": {"enabled": true}})",
                            1, 1024);
  const ZeroSizes sizes = zero_sizes(model, 1, c);
  const Piece eager = plan_pieces(model, prof, c, Workload{1024, Attention::kEager}, sizes)[1];
  const Piece sdpa = plan_pieces(model, prof, c, Workload{1024, Attention::kSdpa}, sizes)[1];
  const double rows = b * a * s, scores = rows * s;
  const double gemms = hardware::gemm_time_s(gpu, rows, s, d, 2) +
                       hardware::gemm_time_s(gpu, rows, d, s, 2);
  const double fused = hardware::attention_time_s(gpu, kCausalFraction * 4 * b * s * s * a * d, 2);
  const double eff = gpu.framework_efficiency;
  CHECK(eager.fwd_s - sdpa.fwd_s ==
        Approx((gemms + hardware::memory_bound_time_s(gpu, 21 * scores)) / eff - fused)
            .epsilon(1e-9));
}

TEST_CASE("FlashAttention-3 runs at the profile's flash3_attention_efficiency", "[sim]") {
  const models::Model model = models::load_model("llama3-8b");
  const hardware::Profile prof = hardware::load_profile("h200");
  const hardware::GpuSpec& gpu = prof.gpu;
  REQUIRE(gpu.flash3_attention_efficiency > gpu.attention_efficiency);
  const DsConfig c = config(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}})",
                            1, 32768);
  const ZeroSizes sizes = zero_sizes(model, 1, c);
  auto block = [&](Attention att) {
    return plan_pieces(model, prof, c, Workload{32768, att}, sizes)[1];
  };
  const Piece flash2 = block(Attention::kFlash2), flash3 = block(Attention::kFlash3);
  const double F = kCausalFraction * 4 * 32768.0 * 32768.0 * 32 * 128;
  // The pieces differ by the attention kernel's time only.
  CHECK(flash2.fwd_s - flash3.fwd_s ==
        Approx(hardware::attention_time_s(gpu, F, 2) - hardware::attention_time_s(gpu, F, 2, true))
            .epsilon(1e-9));
  CHECK(hardware::attention_time_s(gpu, F, 2, true) - gpu.kernel_launch_s ==
        Approx(F / (gpu.peak_flops_per_s * gpu.flash3_attention_efficiency)).epsilon(1e-12));
  // A profile without the field runs FlashAttention-3 at attention_efficiency.
  hardware::GpuSpec plain = gpu;
  plain.flash3_attention_efficiency = 0;
  CHECK(hardware::attention_time_s(plain, F, 2, true) == hardware::attention_time_s(gpu, F, 2));
}

TEST_CASE("Hugging Face's RMSNorm and rotary run as eager chains, Liger's as one kernel each",
          "[sim]") {
  // Llama-3-8B's block: two RMSNorms (h = 4096), rotary on Q and K (A + G = 4096 + 1024), and
  // SwiGLU's silu and product. --loss liger (Workload::fused_swiglu) swaps each for Liger's kernel.
  const models::Model model = models::load_model("llama3-8b");
  const hardware::Profile prof = hardware::load_profile("h100");
  const hardware::GpuSpec& gpu = prof.gpu;
  const double T = 2048, h = 4096, qk = 4096 + 1024, f = 14336;
  const DsConfig c = config(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}})",
                            1, 2048);
  const ZeroSizes sizes = zero_sizes(model, 1, c);
  Workload w{2048, Attention::kSdpa};
  const Piece eager = plan_pieces(model, prof, c, w, sizes)[1];
  w.fused_swiglu = true;
  const Piece liger = plan_pieces(model, prof, c, w, sizes)[1];
  // Kernels (= host operators): norms 2 x (8 -> 1), rotary 10 -> 1, silu folded into the product;
  // backward 2 x (14 -> 1), 18 -> 1, silu's 2 and the product's 2 -> 1.
  CHECK(eager.fwd_ops - liger.fwd_ops == 2 * 7 + 9 + 1);
  CHECK(eager.bwd_ops - liger.bwd_ops == 2 * 13 + 17 + 3);
  auto chain = [&](double bytes, int kernels) {
    return (hardware::memory_bound_time_s(gpu, bytes * T) + (kernels - 1) * gpu.kernel_launch_s) /
           gpu.framework_efficiency;
  };
  const double eager_fwd = 2 * chain(36 * h, 8) + chain(20 * qk, 10) + chain(4 * f, 1) +
                           chain(6 * f, 1);
  const double liger_fwd = 2 * chain(4 * h, 1) + chain(4 * qk, 1) + chain(6 * f, 1);
  const double gpu_eager = eager.fwd_s - eager.fwd_host_s, gpu_liger = liger.fwd_s - liger.fwd_host_s;
  CHECK(gpu_eager - gpu_liger == Approx(eager_fwd - liger_fwd).epsilon(1e-9));
  const double eager_bwd = 2 * chain(84 * h, 14) + chain(30 * qk, 18) + chain(8 * f, 2) +
                           chain(12 * f, 2);
  const double liger_bwd = 2 * chain(6 * h, 1) + chain(4 * qk, 1) + chain(10 * f, 1);
  CHECK((eager.bwd_s - eager.bwd_host_s) - (liger.bwd_s - liger.bwd_host_s) ==
        Approx(eager_bwd - liger_bwd).epsilon(1e-9));
}

TEST_CASE("Qwen v1 runs flash-attn's rotary with FlashAttention-2, its fp32 fallback without",
          "[sim]") {
  models::ModelShape shape = models::load_model("llama2-7b").shape();
  shape.qwen_names = true;
  const models::Model model = models::build_model(shape, "qwen");
  const hardware::Profile prof = hardware::load_profile("a100");
  const DsConfig c = config(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}})",
                            1, 1024);
  const ZeroSizes sizes = zero_sizes(model, 1, c);
  const Piece flash = plan_pieces(model, prof, c, Workload{1024, Attention::kFlash2}, sizes)[1];
  const Piece eager = plan_pieces(model, prof, c, Workload{1024, Attention::kEager}, sizes)[1];
  // Rotary: 3 kernels on Q and 3 on K each way with flash-attn, 8 + 8 forward and 10 + 10
  // backward in the fallback; the rest of the block's kernels are the same.
  CHECK(eager.fwd_ops - flash.fwd_ops == 16 - 6);
  CHECK(eager.bwd_ops - flash.bwd_ops == 20 - 6);
  // --loss liger swaps the norms and SwiGLU for Liger's kernels; the rotary stays flash-attn's.
  Workload liger{1024, Attention::kFlash2};
  liger.fused_swiglu = true;
  const Piece with_liger = plan_pieces(model, prof, c, liger, sizes)[1];
  CHECK(flash.fwd_ops - with_liger.fwd_ops == 2 * 7 + 1);  // its norms and SwiGLU only
}

}  // namespace
}  // namespace zplan::sim
