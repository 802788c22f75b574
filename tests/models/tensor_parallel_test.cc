// AutoTP's view of a model (models/tensor_parallel.h): one rank's parameters, FLOPs and
// activations, and what AutoTP cannot split.
#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "models/catalog.h"
#include "models/finetune.h"
#include "models/tensor_parallel.h"

namespace zplan::models {
namespace {

using Catch::Matchers::Contains;

std::string check_error(const Model& model, int tp) {
  try {
    check_tensor_parallel(model, tp, "ds.json: /tensor_parallel/autotp_size");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("an AutoTP shard holds 1/tp of each block's linears and the rest whole", "[models]") {
  const Model whole = load_model("llama3-8b");
  const Model shard = tensor_parallel_shard(whole, 4);
  CHECK(shard.tensor_parallel() == 4);
  CHECK(shard.whole_params() == whole.num_params());
  CHECK(whole.whole_params() == whole.num_params());
  // Llama-3-8B: h 4096, 32 heads of 128, 8 kv heads, ffn 14336, vocab 128256, 32 blocks, untied.
  // A block's split linears: q, o 4096 x 4096, k, v 4096 x 1024, gate, up, down 4096 x 14336:
  // 218,103,808 elements, 54,525,952 per rank at tp 4; its two RMSNorms (2 x 4096) are whole.
  // The embedding and lm_head (128256 x 4096 = 525,336,576 each) and the final norm are whole.
  const int64_t split = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336;
  CHECK(split == 218103808);
  const int64_t per_block = split / 4 + 2 * 4096;
  CHECK(shard.num_params() == 32 * per_block + 2 * int64_t{525336576} + 4096);
  CHECK(shard.num_params() == 2795769856);
  CHECK(whole.num_params() == 32 * (split + 2 * 4096) + 2 * int64_t{525336576} + 4096);
  // The largest tensor is the whole embedding; a block's largest is gate/up/down / 4.
  CHECK(shard.largest_param_numel() == 525336576);
  // tp 1 is the whole model.
  CHECK(tensor_parallel_shard(whole, 1).num_params() == whole.num_params());
}

TEST_CASE("an AutoTP shard's split elementwise ops move 1/tp, eager or fused", "[models]") {
  // The rotary works on heads/tp and SwiGLU's product on ffn/tp (TpSplit::kSplit), in Hugging
  // Face's chain and in Liger's kernel alike; the norms stay whole.
  const Model whole = load_model("llama3-8b");
  const Model shard = tensor_parallel_shard(whole, 4);
  const auto& w = whole.layers()[1].ops;
  const auto& t = shard.layers()[1].ops;
  REQUIRE(w.size() == t.size());
  int split = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i].kind != OpKind::kMemoryBound) continue;
    INFO(w[i].name);
    const double div = w[i].tp == TpSplit::kSplit ? 4 : 1;
    if (div > 1) ++split;
    CHECK(t[i].bytes_per_token == w[i].bytes_per_token / div);
    CHECK(t[i].backward_bytes() == w[i].backward_bytes() / div);
    CHECK(t[i].fused.bytes_per_token == w[i].fused.bytes_per_token / div);
    CHECK(t[i].fused.backward_bytes_per_token == w[i].fused.backward_bytes_per_token / div);
    CHECK(t[i].kernels == w[i].kernels);
  }
  CHECK(split == 3);  // rotary, silu, gate_mul
}

TEST_CASE("a row-split linear keeps its bias whole, a column-split one splits it", "[models]") {
  // GPT-3 XL (h 2048, 32 heads, ffn 8192, biases on every linear), tp 2. Per block whole: 2
  // LayerNorms (4h) and the biases of the row-split c_proj's (attention h, MLP h); split: c_attn
  // 3h x h + 3h bias, attention c_proj h x h, c_fc 4h x h + 4h, MLP c_proj h x 4h.
  const Model whole = load_model("1.3b");
  const Model shard = tensor_parallel_shard(whole, 2);
  const int64_t h = 2048;
  const int64_t split = 3 * h * h + 3 * h + h * h + 4 * h * h + 4 * h + 4 * h * h;
  const int64_t kept = 4 * h + 2 * h;
  CHECK(whole.layers()[1].numel() == split + kept);
  CHECK(shard.layers()[1].numel() == split / 2 + kept);
  // Embedding, positions, final norm: whole (the head is tied to the embedding).
  CHECK(shard.layers()[0].numel() == whole.layers()[0].numel());
}

TEST_CASE("a shard's FLOPs are 1/tp of the split work and the LM head's whole", "[models]") {
  const Model whole = load_model("llama3-8b");
  const Model shard = tensor_parallel_shard(whole, 8);
  const int64_t s = 4096;
  // The LM head (2 T h V) runs whole on every rank; everything else is split 8 ways.
  const double head = 2.0 * s * 4096 * 128256;
  CHECK(shard.forward_flops(s, 1) == Approx((whole.forward_flops(s, 1) - head) / 8 + head));
  // MFU counts the rank's share of the whole model: exactly 1/8.
  CHECK(shard.forward_flops_share(s, 1) == Approx(whole.forward_flops(s, 1) / 8));
  CHECK(whole.forward_flops_share(s, 1) == whole.forward_flops(s, 1));
}

TEST_CASE("a shard's block activations are Korthikanti's tensor-parallel count", "[models]") {
  // Korthikanti et al. 2022 §4.2.1, tensor parallelism without sequence parallelism: a GPT block
  // stores s*b*h*(10 + 24/t + 5*a*s/(h*t)) bytes (fp16, dropout, eager attention).
  const Model whole = load_model("1.3b");  // h 2048, a 32
  ActivationOptions o;
  o.flash_attention = false;
  const double s = 2048, b = 2, h = 2048, a = 32;
  for (int t : {1, 2, 4, 8}) {
    CAPTURE(t);
    const Model shard = tensor_parallel_shard(whole, t);
    const LayerActivations act = shard.layer_activations(1, 2048, 2, o);
    CHECK(act.stored_bytes == Approx(s * b * h * (10 + 24.0 / t + 5 * a * s / (h * t))));
    // Full checkpointing keeps the block input, whole on every rank.
    CHECK(act.checkpoint_bytes == 2 * s * b * h);
  }
  // The embedding, final norm and LM head are whole: the same bytes on every rank.
  const Model shard = tensor_parallel_shard(whole, 4);
  const size_t head = whole.layers().size() - 1;
  CHECK(shard.layer_activations(head, 2048, 2, o).stored_bytes ==
        whole.layer_activations(head, 2048, 2, o).stored_bytes);
}

TEST_CASE("AutoTP refuses what it cannot split", "[models]") {
  const Model llama = load_model("llama3-8b");  // 32 heads, 8 kv heads, ffn 14336
  CHECK(check_error(llama, 8).empty());
  CHECK(check_error(llama, 1).empty());
  CHECK_THAT(check_error(llama, 16),
             Contains("ds.json: /tensor_parallel/autotp_size: AutoTP size 16 does not divide the "
                      "model's 8 key/value heads"));
  CHECK_THAT(check_error(llama, 3), Contains("does not divide the model's 32 attention heads"));
  CHECK_THAT(check_error(load_model("tiny-mlp"), 2), Contains("has no attention"));
  CHECK_THAT(check_error(apply_finetune(llama, FineTune{16, {"q_proj"}, 1, 0, {}, {}}), 2),
             Contains("not modelled: AutoTP with LoRA adapters"));
}

}  // namespace
}  // namespace zplan::models
