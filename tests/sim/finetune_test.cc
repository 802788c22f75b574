// Frozen parameters and LoRA (models/finetune.h) in the memory model and the step graph:
// optimizer states, gradients and their reduction for the trainable parameters only, 16-bit
// weights (and stage 3's gathers) for all of them, backward without the frozen weights' GEMMs.
// docs/cost_model.md §6 "Frozen parameters and LoRA".
#include <catch2/catch.hpp>

#include "models/catalog.h"
#include "models/finetune.h"
#include "sim/memory_model.h"
#include "sim/simulate.h"
#include "sim/step_builder.h"
#include "sim/step_costs.h"
#include "tests/sim/sim_test_util.h"

namespace zplan::sim {
namespace {

using testing::config;

models::Model lora_8b(int64_t r = 16, const std::string& targets = "q_proj,v_proj") {
  models::FineTune ft;
  ft.lora_rank = r;
  ft.lora_targets = models::parse_lora_targets(targets);
  return models::apply_finetune(models::load_model("llama3-8b"), ft);
}

DsConfig stage(int s, int dp) {
  return config(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
                    "zero_optimization": {"stage": )" +
                    std::to_string(s) + "}}",
                dp, 4096);
}

const Workload kSeq2048{2048, Attention::kSdpa};

TEST_CASE("LoRA: optimizer states and gradients for the adapters, 16-bit weights for all",
          "[sim]") {
  const models::Model full = models::load_model("llama3-8b");
  const models::Model qv = lora_8b();
  const hardware::Cluster cluster = hardware::make_cluster(hardware::load_profile("a100"), 8, 1);
  // 6,815,744 adapter parameters (tests/models/finetune_test.cc), a multiple of 2 * 8: stages
  // 1-2 partition them without padding, 851,968 per rank; every adapter tensor (16 x 4096,
  // 4096 x 16, 1024 x 16) divides by 8 too, so stage 3's partition is the same.
  const double trainable = 6'815'744, P = trainable / 8;
  for (int s : {1, 2, 3}) {
    INFO("stage " << s);
    const ZeroSizes z = zero_sizes(qv, 8, stage(s, 8));
    CHECK(z.psi == static_cast<double>(full.num_params()) + trainable);
    CHECK(z.train_psi == trainable);
    CHECK(z.partition == P);
    const auto m = persistent_memory(z, cluster, stage(s, 8));
    const MemoryBreakdown& g = m[static_cast<int>(Tier::kGpu)];
    CHECK(g[Category::kMaster32] == 4 * P);
    CHECK(g[Category::kOptimizerStates] == 8 * P);
    if (s <= 2) {
      // bit16_groups_flat holds the adapters; the frozen weights stay whole on every rank.
      CHECK(g[Category::kParams16] == 2 * z.psi);
    } else {
      // Stage 3 partitions every parameter, frozen ones too.
      CHECK(g[Category::kParams16] == 2 * z.param_partition);
      CHECK(z.param_partition >= z.psi / 8);
      CHECK(z.param_partition < z.psi / 8 + 1000);
      CHECK(g[Category::kGrads] == 2 * P);  // grad_partitions_flat_buffer
    }
  }
  // Full fine-tuning at stage 2 for comparison: 12 bytes of fp32 states per parameter / 8.
  const ZeroSizes zf = zero_sizes(full, 8, stage(2, 8));
  CHECK(persistent_memory(zf, cluster, stage(2, 8))[static_cast<int>(Tier::kGpu)]
                         [Category::kOptimizerStates] ==
        8 * zf.partition);
  CHECK(zf.partition >= static_cast<double>(full.num_params()) / 8);
}

TEST_CASE("LoRA fits on one 80 GB GPU where full fine-tuning of llama3-8b does not", "[sim]") {
  // Stage 0 on one A100-80GB, micro-batch 1, seq 2048: full fine-tuning needs 16 bytes per
  // parameter of model states alone (128 GB for 8.03 B); LoRA r=16 on q,v keeps the 16 GB of
  // bf16 weights and 16 bytes per adapter parameter (0.1 GB).
  const hardware::Cluster one = hardware::make_cluster(hardware::load_profile("a100"), 1, 1);
  const MemoryReport full =
      analyze_memory(models::load_model("llama3-8b"), one, stage(0, 1), kSeq2048);
  const MemoryReport qv = analyze_memory(lora_8b(), one, stage(0, 1), kSeq2048);
  CHECK_FALSE(full.fit().gpu_fits());
  CHECK(qv.fit().gpu_fits());
  const double base = static_cast<double>(models::load_model("llama3-8b").num_params());
  CHECK(qv.gpu_model_state_bytes == Approx(2 * (base + 6'815'744) + (2 + 4 + 8) * 6'815'744.0));
  // The simulated step agrees.
  CHECK(simulate_step(lora_8b(), one, stage(0, 1), kSeq2048).fit.gpu_fits());
}

TEST_CASE("a frozen linear's backward is one GEMM: 1x its forward FLOPs, adapters 2x", "[sim]") {
  const hardware::Profile prof = hardware::load_profile("a100");
  const DsConfig c = stage(0, 1);
  const models::Model full = models::load_model("llama3-8b");
  const models::Model qv = lora_8b();
  const Piece base = plan_pieces(full, prof, c, kSeq2048, zero_sizes(full, 1, c))[1];
  const Piece lora = plan_pieces(qv, prof, c, kSeq2048, zero_sizes(qv, 1, c))[1];
  // Block of llama3-8b, T = s = 2048, h = 4096, G = 1024, f = 14336, 32 heads of 128:
  // linears 2T*(h*h + 2*h*G + h*h + 3*h*f), attention 4*T*s*a*d; adapters of q and v
  // 2T*r*(h + h) + 2T*r*(h + G).
  const double T = 2048, h = 4096, G = 1024, f = 14336, r = 16;
  const double linears = 2 * T * (2 * h * h + 2 * h * G + 3 * h * f);
  const double attention = 4 * T * T * 32 * 128;
  const double adapters = 2 * T * r * (2 * h) + 2 * T * r * (h + G);
  CHECK(base.fwd_flops == Approx(linears + attention).epsilon(1e-12));
  CHECK(base.bwd_flops == Approx(2 * (linears + attention)).epsilon(1e-12));
  CHECK(lora.fwd_flops == Approx(linears + attention + adapters).epsilon(1e-12));
  CHECK(lora.bwd_flops == Approx(linears + 2 * attention + 2 * adapters).epsilon(1e-12));
  CHECK(lora.bwd_s < base.bwd_s);
  // Only the adapters' four gradients come out of the block.
  CHECK(lora.grads.size() == 4);
  // The embedding's backward does not run: nothing below the first adapter trains.
  const Piece embed = plan_pieces(qv, prof, c, kSeq2048, zero_sizes(qv, 1, c))[0];
  CHECK(embed.no_grad);
  CHECK(embed.bwd_s == 0);
  CHECK(embed.grads.empty());
}

double bytes_of(const StepGraph& g, TaskKind kind) {
  double bytes = 0;
  for (const Task& t : g.tasks()) {
    if (t.kind == kind) bytes += t.bytes;
  }
  return bytes;
}

TEST_CASE("gradients of the adapters are reduced, stage 3 still gathers every weight", "[sim]") {
  const hardware::Cluster cluster = hardware::make_cluster(hardware::load_profile("a100"), 8, 1);
  const models::Model full = models::load_model("llama3-8b");
  const models::Model qv = lora_8b();
  StepGraph g;
  // Stage 2: the adapters' bf16 gradients, 2 * 6,815,744 bytes, in all-reduced buckets.
  StepBuilder(qv, cluster, stage(2, 8), kSeq2048).build(0, &g);
  CHECK(bytes_of(g, TaskKind::kAllReduce) + bytes_of(g, TaskKind::kReduce) ==
        Approx(2 * 6'815'744.0).epsilon(1e-9));
  // Stage 3: forward alone gathers every non-persistent weight, frozen or not.
  const ZeroSizes zf = zero_sizes(full, 8, stage(3, 8));
  StepBuilder(qv, cluster, stage(3, 8), kSeq2048).build(0, &g);
  CHECK(bytes_of(g, TaskKind::kAllGather) >= 2 * zf.non_persistent);
  CHECK(bytes_of(g, TaskKind::kReduceScatter) == Approx(2 * 6'815'744.0).epsilon(1e-3));
}

}  // namespace
}  // namespace zplan::sim
