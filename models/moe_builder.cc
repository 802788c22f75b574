// add_moe_mlp: the sparse mixture-of-experts block of a transformer layer, in the layout of the
// transformers release the model runs under (ModelShape::fused_experts; docs/models.md "Mixture
// of experts"). Split from models/model_builder.cc, which builds the dense rest of the network.
#include <string>

#include "models/layer_builder.h"
#include "models/model.h"

namespace zplan::models::internal {

namespace {

class MoeBuilder {
 public:
  explicit MoeBuilder(const ModelShape& s) : s_(s) {}

  // The sparse MoE block (MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock, Qwen3MoeSparseMoeBlock,
  // DeepseekV2Moe, DeepseekV3MoE): the router (E x h), then the experts in transformers 5's
  // layout (fused_experts: fused_experts() below) or, as Hugging Face transformers 4.x builds
  // them, with the router an nn.Linear(h, E) and
  // per expert an nn.Module of three Linears (gate_proj, up_proj, down_proj; Mixtral's
  // MixtralBlockSparseTop2MLP names them w1, w3, w2, and the block block_sparse_moe, as PEFT's
  // target_modules and leaf_module's names see them), and the shared expert's; no biases. Each
  // Linear is a module of its own (ZeRO-3 gathers it alone) unless ZeRO-3 treats the block as a
  // leaf, which gathers them all at once: Module::moe_block marks them (sim/zero_sizes.cc,
  // docs/models.md "Mixture of experts").
  //
  // The forward is the modeling code's Python loop over the experts (modeling_mixtral.py
  // MixtralSparseMoeBlock.forward): the router's softmax and top-k, then for each expert the
  // torch.where over its mask, the gather of its rows, act(gate(x)) * up(x), down, the routing
  // weight's multiply and index_add_ into the output. The experts are balanced: each runs
  // experts_per_token / experts of the tokens (load imbalance is not modelled).
  void experts(LayerBuilder& b, const std::string& p) {
    const int64_t h = s_.hidden;
    const std::string m = p + s_.moe_block_name;
    const bool mixtral = s_.moe_block_class_name() == "MixtralSparseMoeBlock";
    const std::string gate_name = mixtral ? "w1" : "gate_proj";
    const std::string up_name = mixtral ? "w3" : "up_proj";
    const std::string down_name = mixtral ? "w2" : "down_proj";
    const double k = static_cast<double>(s_.experts_per_token);
    const double hd = static_cast<double>(h);
    auto add = [&](const std::string& name, int64_t numel) {
      Module mod{name, {{name + ".weight", numel}}, ""};
      mod.moe_block = true;
      return b.add_module(std::move(mod));
    };
    if (s_.gpt_oss_experts) {
      // GptOssTopKRouter: F.linear with its weight and bias, top-k, softmax over the k.
      Module router{m + ".router",
                    {{m + ".router.weight", s_.experts * h}, {m + ".router.bias", s_.experts}},
                    ""};
      router.moe_block = true;
      b.gemm(m + ".router", s_.experts, h, b.add_module(std::move(router)));
    } else if (s_.dense_experts) {
      // Llama4Router: an nn.Linear(h, E) subclass (a plain nn.Linear before 4.54), top-k of the
      // logits, sigmoid of the kept ones.
      b.gemm(m + ".router", s_.experts, h, add(m + ".router", s_.experts * h));
    } else {
      b.gemm(m + ".gate", s_.experts, h, add(m + ".gate", s_.experts * h));
    }
    b.layer().ops.back().peft_linear = s_.router_linear;
    // Softmax in fp32, top-k, renormalize, cast, the expert mask (one_hot) and which experts it
    // hits: read the 16-bit logits, write fp32 probabilities and the k chosen weights and
    // indices (estimate); and the zeroed output the experts add into (2h).
    b.memory_op("router_topk", 6.0 * static_cast<double>(s_.experts) + 12.0 * k + 2.0 * hd);
    if (s_.fused_experts) {
      fused_experts(b, m);
    } else {
      expert_loop(b, m, gate_name, up_name, down_name, add);
    }
    shared_experts(b, m, add);
  }

 private:

  // transformers 5's <Type>Experts (modeling_mixtral.py MixtralExperts, and the same class in
  // every MoE model): one module holding gate_up_proj [E, 2f, h] and down_proj [E, h, f], run by
  // integrations/moe.py grouped_mm_experts_forward, the default experts_implementation: the
  // routed rows gathered (hidden_states[token_idx]) and sorted by expert (argsort, histc,
  // cumsum for the offsets), one torch._grouped_mm for gate and up, chunk, act(gate) * up, one
  // for down, the routing weight's multiply, the inverse permutation and index_add_. ZeRO-3
  // gathers the two tensors as one module, whichever experts the tokens reach.
  void fused_experts(LayerBuilder& b, const std::string& m) {
    const int64_t h = s_.hidden, fe = s_.expert_ffn;
    const double k = static_cast<double>(s_.experts_per_token);
    const double hd = static_cast<double>(h), fed = static_cast<double>(fe);
    const std::string x = m + ".experts";
    Module mod{x,
               {{x + ".gate_up_proj", s_.experts * 2 * fe * h},
                {x + ".down_proj", s_.experts * h * fe}},
               ""};
    if (s_.gpt_oss_experts) {
      mod.params.push_back({x + ".gate_up_proj_bias", s_.experts * 2 * fe});
      mod.params.push_back({x + ".down_proj_bias", s_.experts * h});
    }
    mod.moe_block = true;
    const int experts = b.add_module(std::move(mod));
    if (s_.dense_experts) {
      dense_experts(b, x, experts);
      return;
    }
    // chunk (views), act(gate) (read f, write f) and the product (read two, write one); GPT-OSS:
    // the gate_up bias (read and write 2f), two clamps, the scaled sigmoid, its product, up + 1
    // and the last product, each reading and writing f (estimate).
    const double act = s_.gpt_oss_experts ? 40.0 * fed : 10.0 * fed;
    // The down bias (GPT-OSS): read and write h.
    const double down_bias = s_.gpt_oss_experts ? 4.0 * hd : 0.0;
    if (s_.expert_loop) {
      // The loop over the experts reached (GptOssExperts.forward of transformers 4.x): per
      // expert the mask's torch.where, the gather of its rows, a GEMM on its slice of
      // gate_up_proj, the gate, a GEMM on its slice of down_proj, the routing weight and
      // index_add_, all on the one module ZeRO-3 gathers.
      const double rows = k / static_cast<double>(s_.experts);
      for (int64_t e = 0; e < s_.experts; ++e) {
        const std::string y = x + "." + std::to_string(e) + ".";
        b.memory_op(y + "route", 8.0 * k);
        b.memory_op(y + "dispatch", 4.0 * hd * rows);
        expert_gemm(b, x + ".gate_up_proj", 2 * fe, h, experts, rows);
        b.layer().ops.back().peft_linear = false;
        b.memory_op(y + "act", act * rows);
        expert_gemm(b, x + ".down_proj", h, fe, experts, rows);
        b.layer().ops.back().peft_linear = false;
        b.memory_op(y + "combine", (10.0 * hd + down_bias) * rows);
      }
      return;
    }
    // argsort of the k routed slots and of its permutation (int64 keys and indices, read and
    // written), histc and cumsum over them (estimate): 40 bytes per routed slot.
    b.memory_op(x + ".sort", 40.0 * k);
    // hidden_states[token_idx], then [perm]: read and write h per routed row, twice.
    b.memory_op(x + ".dispatch", 8.0 * hd * k);
    all_experts_gemm(b, x + ".gate_up_proj", 2 * fe, h, experts, k, false);
    b.memory_op(x + ".act", act * k);
    all_experts_gemm(b, x + ".down_proj", h, fe, experts, k, false);
    // The routing weight's multiply (read and write h), out[inv_perm] (read and write h) and
    // index_add_ into the output (read the row and the output row, write it): 14h per row.
    b.memory_op(x + ".combine", (14.0 * hd + down_bias) * k);
  }

  // Llama4TextMoe.forward (modeling_llama4.py, the same in every release): the tokens repeated
  // once per expert (hidden_states.repeat, E*h written a token), each copy scaled by its
  // sigmoid score (read and write E*h), Llama4TextExperts' bmm of [E, T, h] with gate_up_proj
  // [E, h, 2f], chunk, up * act(gate), the bmm with down_proj [E, f, h], and the sum over the E
  // outputs into the shared expert's (read E*h, read and write h). Every expert computes every
  // token: E GEMMs of T rows, one kernel each way.
  void dense_experts(LayerBuilder& b, const std::string& x, int experts) {
    const int64_t h = s_.hidden, fe = s_.expert_ffn;
    const double e = static_cast<double>(s_.experts);
    const double hd = static_cast<double>(h), fed = static_cast<double>(fe);
    b.memory_op(x + ".dispatch", 6.0 * hd * e + 2.0 * hd);
    all_experts_gemm(b, x + ".gate_up_proj", 2 * fe, h, experts, e, true);
    b.memory_op(x + ".act", 10.0 * fed * e);
    all_experts_gemm(b, x + ".down_proj", h, fe, experts, e, true);
    b.memory_op(x + ".combine", 2.0 * hd * e + 4.0 * hd);
  }

  // One kernel over all of a module's experts: torch._grouped_mm over the routed rows sorted by
  // expert (rows_per_token k), or Llama 4's torch.bmm over every token's E copies (batched, E).
  // Adapters never wrap the 3D expert tensors.
  void all_experts_gemm(LayerBuilder& b, const std::string& name, int64_t n, int64_t kdim,
                        int module, double rows_per_token, bool batched) {
    b.gemm(name, n, kdim, module);
    ComputeOp& op = b.layer().ops.back();
    op.token_factor = rows_per_token;
    op.groups = s_.experts;
    op.batched = batched;
    if (batched) {
      op.model_flops_fraction =
          static_cast<double>(s_.experts_per_token) / static_cast<double>(s_.experts);
    }
    op.peft_linear = false;
  }

  // transformers 4.x: per expert an nn.Module of three Linears, run by the modeling code's loop.
  template <typename Add>
  void expert_loop(LayerBuilder& b, const std::string& m, const std::string& gate_name,
                   const std::string& up_name, const std::string& down_name, Add& add) {
    const int64_t h = s_.hidden, fe = s_.expert_ffn;
    const double k = static_cast<double>(s_.experts_per_token);
    const double hd = static_cast<double>(h), fed = static_cast<double>(fe);
    const double rows = k / static_cast<double>(s_.experts);  // an expert's rows per token
    for (int64_t e = 0; e < s_.experts; ++e) {
      const std::string x = m + ".experts." + std::to_string(e) + ".";
      const int gate = add(x + gate_name, fe * h);
      const int up = add(x + up_name, fe * h);
      const int down = add(x + down_name, h * fe);
      // torch.where over its row of the int64 mask (8 bytes per routed slot), then the gather
      // of its tokens' hidden states (read and write h each).
      b.memory_op(x + "route", 8.0 * k);
      b.memory_op(x + "dispatch", 4.0 * hd * rows);
      expert_gemm(b, x + gate_name, fe, h, gate, rows);
      b.memory_op(x + "silu", 4.0 * fed * rows);
      expert_gemm(b, x + up_name, fe, h, up, rows);
      b.memory_op(x + "gate_mul", 6.0 * fed * rows);
      expert_gemm(b, x + down_name, h, fe, down, rows);
      // The routing weight's multiply (read and write h) and index_add_ into the output (read
      // the row and the output row, write it): 10h per row.
      b.memory_op(x + "combine", 10.0 * hd * rows);
    }
  }

  // The always-on shared expert: Qwen2-MoE's shared_expert with its sigmoid shared_expert_gate,
  // DeepSeek's and GLM-4.5's shared_experts (DeepseekV2Moe / DeepseekV3MoE / Glm4MoeMoE:
  // n_shared_experts MLPs fused into one of n * width), nn.Linears in both layouts.
  template <typename Add>
  void shared_experts(LayerBuilder& b, const std::string& m, Add& add) {
    const int64_t h = s_.hidden, fs = s_.shared_expert_ffn;
    const double hd = static_cast<double>(h);
    if (fs > 0) {
      const double fsd = static_cast<double>(fs);
      // Qwen2-MoE names its gated one shared_expert, Llama 4 its ungated one; DeepSeek and
      // GLM-4.5 shared_experts.
      const bool one = s_.shared_expert_gate || s_.dense_experts;
      const std::string x = m + (one ? ".shared_expert." : ".shared_experts.");
      b.gemm(x + "gate_proj", fs, h, add(x + "gate_proj", fs * h));
      b.memory_op("shared_silu", 4.0 * fsd);
      b.gemm(x + "up_proj", fs, h, add(x + "up_proj", fs * h));
      b.memory_op("shared_gate_mul", 6.0 * fsd);
      b.gemm(x + "down_proj", h, fs, add(x + "down_proj", h * fs));
      if (s_.shared_expert_gate) {
        b.gemm(m + ".shared_expert_gate", 1, h, add(m + ".shared_expert_gate", h));
        b.memory_op("shared_sigmoid_mul", 6.0 * hd);
      }
      b.memory_op("shared_add", add_bytes(h, 2));
    }
  }

  // One routed expert's GEMM: `rows` of its rows per token of the micro-batch.
  void expert_gemm(LayerBuilder& b, const std::string& name, int64_t n, int64_t k, int module,
                   double rows) {
    b.gemm(name, n, k, module);
    b.layer().ops.back().token_factor = rows;
  }

  const ModelShape& s_;
};

}  // namespace

void add_moe_mlp(LayerBuilder& b, const ModelShape& s, const std::string& prefix) {
  MoeBuilder(s).experts(b, prefix);
}

}  // namespace zplan::models::internal
