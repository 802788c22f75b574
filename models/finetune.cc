#include "models/finetune.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <string>
#include <string_view>

#include "base/input_error.h"
#include "base/text.h"

namespace zplan::models {

namespace {

// What a block's linear does, read from the last components of its op name as model_builder.cc
// names them per family (Hugging Face's module names).
enum class Role {
  kQ,          // q_proj, MLA q_a_proj: reads the attention input
  kQLatent,    // MLA q_b_proj: reads the query latent
  kK,
  kV,
  kQkv,        // fused q/k/v: c_attn (GPT-2), query_key_value (NeoX, Falcon), qkv_proj (Phi-3)
  kKv,         // MLA kv_a_proj_with_mqa: reads the attention input
  kKvLatent,   // MLA kv_b_proj
  kOut,        // o_proj, out_proj, dense (NeoX, Falcon), attn.c_proj (GPT-2)
  kGate,       // gate_proj (dense, expert or shared expert)
  kUp,         // up_proj; the non-gated MLP's first linear: c_fc, fc1, fc_in, dense_h_to_4h
  kGateUp,     // Phi-3 gate_up_proj
  kDown,       // down_proj; the non-gated MLP's second: mlp.c_proj, fc2, fc_out, dense_4h_to_h
  kRouter,     // a mixture of experts' router (mlp.gate) and Qwen2-MoE's shared_expert_gate
};

std::string last_component(const std::string& name, int from_end = 0) {
  size_t end = name.size();
  for (int i = 0; i < from_end && end != std::string::npos; ++i) {
    end = name.rfind('.', end - 1);
    if (end == std::string::npos) return "";
  }
  size_t dot = name.rfind('.', end - 1);
  size_t start = dot == std::string::npos ? 0 : dot + 1;
  return name.substr(start, end - start);
}

Role role_of(const std::string& op_name) {
  const std::string last = last_component(op_name);
  const std::string parent = last_component(op_name, 1);
  if (last == "q_proj" || last == "q_a_proj") return Role::kQ;
  if (last == "q_b_proj") return Role::kQLatent;
  if (last == "k_proj") return Role::kK;
  if (last == "v_proj") return Role::kV;
  if (last == "qkv_proj" || last == "c_attn" || last == "query_key_value") return Role::kQkv;
  if (last == "kv_a_proj_with_mqa") return Role::kKv;
  if (last == "kv_b_proj") return Role::kKvLatent;
  if (last == "o_proj" || last == "out_proj" || last == "dense") return Role::kOut;
  if (last == "c_proj") return parent == "attn" ? Role::kOut : Role::kDown;
  // Qwen v1's QWenMLP (mlp.w1, mlp.w2): c_proj(w1(x) * silu(w2(x))), so w2 is the gate and w1
  // the up projection. Mixtral's experts (MixtralBlockSparseTop2MLP, experts.<e>.w1): w1 the
  // gate, w3 the up, w2 the down projection.
  if (parent == "mlp" && last == "w1") return Role::kUp;
  if (parent == "mlp" && last == "w2") return Role::kGate;
  if (last == "gate_proj" || last == "w1") return Role::kGate;
  if (last == "up_proj" || last == "w3" || last == "c_fc" || last == "fc1" || last == "fc_in" ||
      last == "dense_h_to_4h") {
    return Role::kUp;
  }
  if (last == "gate_up_proj") return Role::kGateUp;
  if (last == "down_proj" || last == "w2" || last == "fc2" || last == "fc_out" ||
      last == "dense_4h_to_h") {
    return Role::kDown;
  }
  return Role::kRouter;  // gate, shared_expert_gate: the only other linears of a block
}

// The generic names a role answers to. On families that fuse or rename projections, the generic
// name selects the linear that holds that projection: q_proj, k_proj and v_proj select a fused
// qkv (one adapter over its whole output), and under MLA q_proj selects q_proj or both of q_a_proj
// and q_b_proj, k_proj and v_proj both kv_a_proj_with_mqa and kv_b_proj (each carries keys and
// values); gate_proj and up_proj select gate_up_proj; up_proj and down_proj select a non-gated
// MLP's first and second linear; o_proj the attention output projection.
bool generic_match(const std::string& target, Role r) {
  if (target == "q_proj") return r == Role::kQ || r == Role::kQLatent || r == Role::kQkv;
  if (target == "k_proj") {
    return r == Role::kK || r == Role::kQkv || r == Role::kKv || r == Role::kKvLatent;
  }
  if (target == "v_proj") {
    return r == Role::kV || r == Role::kQkv || r == Role::kKv || r == Role::kKvLatent;
  }
  if (target == "o_proj") return r == Role::kOut;
  if (target == "gate_proj") return r == Role::kGate || r == Role::kGateUp;
  if (target == "up_proj") return r == Role::kUp || r == Role::kGateUp;
  if (target == "down_proj") return r == Role::kDown;
  return false;
}

// PEFT "all-linear": every nn.Linear of the blocks (not the LM head, which PEFT leaves out as
// the output layer). A target also matches a linear by its own last name component, as PEFT
// matches target_modules against the end of module names.
bool target_matches(const std::string& target, const std::string& op_name) {
  if (target == "all-linear") return true;
  if (target == last_component(op_name)) return true;
  // A dotted target (self_attn.q_proj, layers.0.mlp.down_proj) matches as PEFT's
  // check_target_module_exists does: the whole name, or its end after a dot.
  if (target.find('.') != std::string::npos) {
    if (op_name == target || op_name.ends_with("." + target)) return true;
    // A full name as model.named_modules() prints it: zplan's names start below the base
    // model's prefix (base_model_prefix: model, transformer, gpt_neox; OPT's model.decoder).
    for (std::string_view prefix : {"model.decoder.", "model.", "transformer.", "gpt_neox."}) {
      if (target.starts_with(prefix) && op_name == target.substr(prefix.size())) return true;
    }
    return false;
  }
  // Expert GEMMs are named <block>.mlp.experts.<e>.gate_proj (Mixtral's
  // <block>.block_sparse_moe.experts.<e>.w1), one op per expert.
  return generic_match(target, role_of(op_name));
}

void freeze_layer(Layer& layer) {
  for (Module& m : layer.modules) {
    for (Param& p : m.params) p.trainable = false;
  }
  for (ComputeOp& op : layer.ops) {
    if (op.kind == OpKind::kGemm) op.frozen_weight = true;
  }
}

constexpr int64_t kMaxLoraRank = int64_t{1} << 16;

// Adds LoRA adapters to the block's targeted GEMMs. Returns the targets that matched; appends
// to `linears` the last name of each linear adapted that it does not hold yet.
std::set<std::string> add_adapters(Layer& layer, const std::vector<std::string>& targets,
                                   int64_t r, double dropout, std::vector<std::string>* linears) {
  std::set<std::string> matched;
  std::vector<ComputeOp> ops;
  for (const ComputeOp& base : layer.ops) {
    ops.push_back(base);
    // PEFT's target_modules wraps nn.Linear modules only: not transformers 5's 3D expert
    // tensors or its TopKRouter weights (ComputeOp::peft_linear).
    if (base.kind != OpKind::kGemm || !base.peft_linear) continue;
    bool hit = false;
    for (const std::string& t : targets) {
      if (target_matches(t, base.name)) {
        matched.insert(t);
        hit = true;
      }
    }
    if (!hit) continue;
    // Named by its last component, or with its parent's where another linear of the block shares
    // that name in another role (GPT-2's and Qwen v1's attn.c_proj and mlp.c_proj).
    std::string linear = last_component(base.name);
    const bool shared = std::any_of(layer.ops.begin(), layer.ops.end(), [&](const ComputeOp& o) {
      return o.kind == OpKind::kGemm && last_component(o.name) == linear &&
             role_of(o.name) != role_of(base.name);
    });
    if (shared) linear = last_component(base.name, 1) + "." + linear;
    if (std::find(linears->begin(), linears->end(), linear) == linears->end()) {
      linears->push_back(linear);
    }
    // lora_A and lora_B are Linears of their own inside the wrapped one (peft's lora.Linear), so
    // modules of their own; inside a mixture of experts' block, as the expert they adapt.
    const std::string a_name = base.name + ".lora_A";
    const std::string b_name = base.name + ".lora_B";
    const bool in_moe = base.module >= 0 && layer.modules[base.module].moe_block;
    Module a{a_name, {{a_name + ".weight", r * base.k, true}}, ""};
    Module b{b_name, {{b_name + ".weight", base.n * r, true}}, ""};
    a.moe_block = b.moe_block = in_moe;
    layer.modules.push_back(std::move(a));
    const int a_module = static_cast<int>(layer.modules.size()) - 1;
    layer.modules.push_back(std::move(b));
    const int b_module = static_cast<int>(layer.modules.size()) - 1;
    // lora_B(lora_A(x)) * scaling added to the base output (peft/tuners/lora/layer.py
    // Linear.forward): GEMMs [T x in] x [in x r] and [T x r] x [r x out], then the scale (read
    // and write `out`) and the add (read two, write one): 10 * out bytes per token in 16 bits.
    // lora_dropout > 0 (peft/tuners/lora/layer.py update_layer: nn.Dropout, else nn.Identity):
    // dropout(x) reads x and writes the dropped copy and its boolean mask, 2D + 1 bytes per
    // element, 5 in 16 bits; lora_A saves the copy (D per element) and the mask stays for
    // backward (1 byte), one pair per adapter even where adapters share an input. Backward:
    // dropout's gradient is the incoming one times the mask, scaled (native_dropout_backward:
    // read the gradient and the mask, write), the same 5 bytes an element; the add passes its
    // gradient to both inputs without a kernel, and the scale's (MulBackward) reads and writes
    // `out`: 4 * out bytes -- not twice the forward's, the default of a memory-bound op.
    if (dropout > 0) {
      ComputeOp drop;
      drop.name = base.name + ".lora_dropout";
      drop.kind = OpKind::kMemoryBound;
      drop.bytes_per_token = 5.0 * static_cast<double>(base.k) * base.token_factor;
      drop.backward_bytes_per_token = drop.bytes_per_token;
      ops.push_back(drop);
      layer.adapter_elements += static_cast<double>(base.k) * base.token_factor;
      layer.adapter_mask_bytes += static_cast<double>(base.k) * base.token_factor;
    }
    ComputeOp ga;
    ga.name = a_name;
    ga.kind = OpKind::kGemm;
    ga.n = r;
    ga.k = base.k;
    ga.module = a_module;
    ga.token_factor = base.token_factor;
    ComputeOp gb = ga;
    gb.name = b_name;
    gb.n = base.n;
    gb.k = r;
    gb.module = b_module;
    ComputeOp add;
    add.name = base.name + ".lora_add";
    add.kind = OpKind::kMemoryBound;
    add.bytes_per_token = 10.0 * static_cast<double>(base.n) * base.token_factor;
    add.backward_bytes_per_token = 4.0 * static_cast<double>(base.n) * base.token_factor;
    ops.push_back(ga);
    ops.push_back(gb);
    ops.push_back(add);
    layer.adapter_elements += static_cast<double>(r) * base.token_factor;
  }
  layer.ops = std::move(ops);
  return matched;
}

// Which linear inputs a block still saves: an input is saved while any GEMM reading it has a
// trainable weight or an adapter (lora_A saves it: with lora_dropout 0 it is the same tensor).
// PyTorch's autograd saves a matmul operand only when the other operand's gradient needs it
// (tools/autograd/gen_variable_type.py guard_for: a saved input used by one derivative formula
// is saved under grad_fn->should_compute_output of that input), so the input of a frozen linear
// is kept only by something else that reads it.
void mark_unsaved(Layer& layer, double dropout) {
  bool has[4] = {false, false, false, false};
  bool needed[4] = {false, false, false, false};
  const size_t n = layer.ops.size();
  for (size_t i = 0; i < n; ++i) {
    const ComputeOp& op = layer.ops[i];
    if (op.kind != OpKind::kGemm) continue;
    const std::string last = last_component(op.name);
    if (last == "lora_A" || last == "lora_B") continue;
    int group = -1;
    switch (role_of(op.name)) {
      case Role::kQ:
      case Role::kK:
      case Role::kV:
      case Role::kQkv:
      case Role::kKv:
        group = 0;
        break;
      case Role::kOut:
        group = 1;
        break;
      case Role::kGate:
      case Role::kUp:
      case Role::kGateUp:
      case Role::kRouter:
        // The shared expert's and the router's GEMMs read the MLP input too; the routed
        // experts read their dispatched copies (counted in the experts' own estimate).
        group = op.token_factor != 1 ? -1 : 2;
        break;
      case Role::kDown:
        group = op.token_factor != 1 ? -1 : 3;
        break;
      case Role::kQLatent:
      case Role::kKvLatent:
        break;
    }
    if (group < 0) continue;
    has[group] = true;
    // With lora_dropout > 0, lora_A reads the dropped copy, not the input.
    const bool adapter = dropout == 0 && i + 1 < n && layer.ops[i + 1].name == op.name + ".lora_A";
    if (!op.frozen_weight || adapter) needed[group] = true;
  }
  layer.unsaved.attention_in = has[0] && !needed[0];
  layer.unsaved.out_in = has[1] && !needed[1];
  layer.unsaved.mlp_in = has[2] && !needed[2];
  layer.unsaved.down_in = has[3] && !needed[3];
}

}  // namespace

namespace {

// A comma list of module names as PEFT's target_modules and modules_to_save take them.
std::vector<std::string> parse_module_names(const std::string& list, const std::string& flag,
                                            const char* example) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos
                                                                     : comma - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) {
      throw InputError(flag, "has an empty entry in '" + list + "' (a comma list such as " +
                                 example + ")");
    }
    bool name = item.front() != '.' && item.back() != '.' &&
                item.find("..") == std::string::npos;
    for (char c : item) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) {
        name = false;
      }
    }
    if (!name) {
      throw InputError(flag, "'" + item +
                                 "' is not a module name (letters, digits, _ and -, dotted as in "
                                 "the model's module names; e.g. " + example + ")");
    }
    if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> parse_modules_to_save(const std::string& list) {
  return parse_module_names(list, "--lora-modules-to-save", "embed_tokens,lm_head");
}

std::vector<std::string> parse_lora_targets(const std::string& list) {
  std::vector<std::string> out =
      parse_module_names(list, "--lora-targets", "q_proj, self_attn.o_proj, all-linear");
  // PEFT reads "all-linear" only as the whole target_modules string; inside a list it is a
  // module name that matches nothing.
  if (out.size() > 1 && std::find(out.begin(), out.end(), "all-linear") != out.end()) {
    throw InputError("--lora-targets", "'all-linear' stands alone (PEFT reads it only as the "
                                       "whole target_modules), got '" + list + "'");
  }
  return out;
}

std::string describe_finetune(const FineTune& ft) {
  if (ft.lora()) {
    std::string targets;
    for (const std::string& t : ft.lora_targets) targets += (targets.empty() ? "" : ",") + t;
    // Where the names given select linears of other names (a fused qkv, Mixtral's w1/w3/w2),
    // say which; "all-linear" is its own description.
    std::string linears;
    for (const std::string& l : ft.lora_linears) linears += (linears.empty() ? "" : ",") + l;
    const std::set<std::string> given(ft.lora_targets.begin(), ft.lora_targets.end());
    const std::set<std::string> selected(ft.lora_linears.begin(), ft.lora_linears.end());
    const bool renamed = !selected.empty() && selected != given && !given.count("all-linear");
    std::string saved;
    for (const std::string& m : ft.modules_to_save) saved += (saved.empty() ? "" : ",") + m;
    if (!saved.empty()) saved = ", " + saved + " trained in full (modules_to_save)";
    return "LoRA rank " + std::to_string(ft.lora_rank) + " on " + targets +
           (ft.lora_dropout > 0 ? strformat(", dropout %g", ft.lora_dropout) : std::string()) +
           (renamed ? " (the linears " + linears + "; base weights frozen)"
                    : " (base weights frozen)") +
           saved;
  }
  if (ft.trainable_fraction < 1) {
    return strformat("the bottom layers frozen (--trainable %g)", ft.trainable_fraction);
  }
  return "";
}

namespace {

// PEFT's modules_to_save (ModulesToSaveWrapper): each named module of the embedding and LM head
// layers gets a trainable deep copy, <name>.modules_to_save.default, which forward runs in its
// place; the original stays, frozen, and is no longer read. A name matches a module by its
// whole name or its end after a dot, as PEFT's key.endswith(target) does for these names.
void save_modules(std::vector<Layer>& layers, const std::vector<std::string>& names,
                  const std::string& model_name) {
  for (const std::string& t : names) {
    bool found = false;
    std::string offered;
    for (Layer& layer : layers) {
      const bool ends = layer.kind == LayerKind::kEmbedding || layer.kind == LayerKind::kLmHead;
      const size_t count = layer.modules.size();
      for (size_t mi = 0; mi < count; ++mi) {
        // Read before the copy is appended (push_back may move the modules), not after.
        const Module& m = layer.modules[mi];
        if (ends && m.tied_to.empty()) offered += (offered.empty() ? "" : ", ") + m.name;
        if (m.name != t && !m.name.ends_with("." + t)) continue;
        if (!ends) {
          throw InputError("--lora-modules-to-save",
                           "'" + t + "': not modelled: modules_to_save on " + m.name +
                               " (zplan trains the embedding and LM head modules in full)");
        }
        auto ties_to_m = [&](const Module& o) { return o.tied_to == m.name; };
        const bool tied = !m.tied_to.empty() ||
                          std::any_of(layers.begin(), layers.end(), [&](const Layer& l) {
                            return std::any_of(l.modules.begin(), l.modules.end(), ties_to_m);
                          });
        if (tied) {
          throw InputError("--lora-modules-to-save",
                           "'" + t + "': not modelled: modules_to_save on " + model_name +
                               "'s tied embedding and LM head (PEFT copies one side of the tie)");
        }
        Module copy = m;
        copy.name = m.name + ".modules_to_save.default";
        for (Param& p : copy.params) {
          p.name = copy.name + p.name.substr(m.name.size());
          p.trainable = true;
        }
        layer.modules.push_back(std::move(copy));
        const int copy_index = static_cast<int>(layer.modules.size()) - 1;
        for (ComputeOp& op : layer.ops) {
          if (op.module != static_cast<int>(mi)) continue;
          op.module = copy_index;
          op.frozen_weight = false;
        }
        found = true;
      }
    }
    if (!found) {
      throw InputError("--lora-modules-to-save",
                       "'" + t + "' matches no embedding or LM head module of " + model_name +
                           " (its modules: " + offered + ")");
    }
  }
}

}  // namespace

Model apply_finetune(const Model& model, const FineTune& ft) {
  const ModelShape& shape = model.shape();
  const std::string flag = ft.lora() ? "--lora-rank" : "--trainable";
  if (ft.lora() && ft.trainable_fraction < 1) {
    throw InputError("--trainable", "cannot be combined with --lora-rank (LoRA trains the "
                                    "adapters only; every base parameter is frozen)");
  }
  if (!(ft.trainable_fraction > 0 && ft.trainable_fraction <= 1)) {
    throw InputError("--trainable", "must be a fraction in (0, 1], got " +
                                        strformat("%g", ft.trainable_fraction));
  }
  if (ft.lora_rank < 0 || ft.lora_rank > kMaxLoraRank) {
    throw InputError("--lora-rank", "must be between 1 and " + std::to_string(kMaxLoraRank) +
                                        ", got " + std::to_string(ft.lora_rank));
  }
  if (!ft.frozen()) return model;
  if (shape.family == Family::kMlp) {
    throw InputError(flag, "the executor's MLP stacks (" + model.name() +
                               ") are trained in full; fine-tuning applies to transformers");
  }
  std::vector<Layer> layers = model.layers();
  FineTune applied = ft;
  if (ft.lora()) {
    applied.lora_linears.clear();
    std::set<std::string> matched;
    for (Layer& layer : layers) {
      freeze_layer(layer);
      if (layer.kind != LayerKind::kBlock) continue;
      std::set<std::string> m =
          add_adapters(layer, ft.lora_targets, ft.lora_rank, ft.lora_dropout,
                       &applied.lora_linears);
      matched.insert(m.begin(), m.end());
    }
    for (const std::string& t : ft.lora_targets) {
      if (matched.count(t)) continue;
      // PEFT wraps the embedding or the LM head when a target names it; zplan adapts the
      // blocks' linears only.
      for (const Layer& layer : layers) {
        if (layer.kind != LayerKind::kEmbedding && layer.kind != LayerKind::kLmHead) continue;
        for (const Module& mod : layer.modules) {
          if (target_matches(t, mod.name) && t != "all-linear") {
            throw InputError("--lora-targets",
                             "'" + t + "': not modelled: LoRA on " + mod.name +
                                 " (zplan adds adapters to the blocks' linears only)");
          }
        }
      }
      std::string names;
      std::set<std::string> seen;
      std::set<Role> roles;
      for (const Layer& layer : layers) {
        if (layer.kind != LayerKind::kBlock) continue;
        for (const ComputeOp& op : layer.ops) {
          const std::string last = last_component(op.name);
          if (op.kind != OpKind::kGemm || !op.peft_linear || last == "lora_A" ||
              last == "lora_B") {
            continue;
          }
          roles.insert(role_of(op.name));
          if (seen.insert(last).second) names += (names.empty() ? "" : ", ") + last;
        }
      }
      // The Llama-style names every family also answers to where they select one of those
      // linears, less those already listed.
      std::string aliases;
      for (const char* a :
           {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}) {
        const bool selects = std::any_of(roles.begin(), roles.end(),
                                         [&](Role r) { return generic_match(a, r); });
        if (!seen.count(a) && selects) aliases += std::string(a) + ", ";
      }
      std::string fused;
      if (shape.gpt_oss_experts || shape.dense_experts) {
        fused = std::string("; ") + (shape.gpt_oss_experts ? "GPT-OSS" : "Llama 4") +
                " keeps its routed experts as 3D tensors of " + shape.moe_block_name +
                ".experts in every transformers release, which target_modules cannot wrap "
                "(PEFT's target_parameters is not modelled)";
      } else if (shape.fused_experts) {
        fused = "; transformers 5 keeps the routed experts as 3D tensors of " +
                shape.moe_block_name +
                ".experts, which target_modules cannot wrap (PEFT's target_parameters is not "
                "modelled; --transformers 4 builds a Linear per expert)";
      }
      throw InputError("--lora-targets", "'" + t + "' matches no linear of " + model.name() +
                                             " (its block linears: " + names + "; or " +
                                             aliases + "all-linear" + fused + ")");
    }
    save_modules(layers, ft.modules_to_save, model.name());
  } else {
    // Freeze whole layers from the bottom while at most (1 - F) of the parameters are frozen.
    const double total = static_cast<double>(model.num_params());
    const double may_freeze = (1 - ft.trainable_fraction) * total;
    double frozen = 0;
    std::set<std::string> frozen_modules;
    for (Layer& layer : layers) {
      const double n = static_cast<double>(layer.numel());
      if (frozen + n > may_freeze) break;
      frozen += n;
      freeze_layer(layer);
      for (const Module& m : layer.modules) frozen_modules.insert(m.name);
    }
    // A tied LM head is the embedding's matrix: frozen with it.
    for (Layer& layer : layers) {
      for (Module& m : layer.modules) {
        if (m.tied_to.empty() || !frozen_modules.count(m.tied_to)) continue;
        for (Param& p : m.params) p.trainable = false;
        for (ComputeOp& op : layer.ops) {
          if (op.kind == OpKind::kGemm && layer.modules[op.module].name == m.name) {
            op.frozen_weight = true;
          }
        }
      }
    }
  }
  // Autograd records nothing until the first layer holding a trainable parameter.
  bool grad_flows = false;
  for (Layer& layer : layers) {
    bool trains = false;
    for (const Module& m : layer.modules) {
      for (const Param& p : m.params) trains = trains || p.trainable;
    }
    grad_flows = grad_flows || trains;
    layer.no_grad = !grad_flows;
    if (layer.kind == LayerKind::kBlock && grad_flows) mark_unsaved(layer, ft.lora_dropout);
  }
  Model out(shape, std::move(layers));
  out.set_finetune(applied);
  return out;
}

}  // namespace zplan::models
