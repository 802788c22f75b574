// Model: what zplan needs to know about a network to simulate training it.
//
// A model is an ordered list of layers (embedding, N transformer blocks, final norm, LM head --
// or, for the executor's MLP stacks, N linear layers). Each layer lists
//  * its modules: the PyTorch modules that directly own parameters, in the order forward uses
//    them. ZeRO-3 gathers and releases parameters one module at a time (DeepSpeed's
//    fetch_sub_module, reference/deepspeed_internals.md §2.2 item 8), and DeepSpeed's
//    estimator's "largest layer" is the largest module (§3.2);
//  * its forward compute operations (GEMMs, attention products, memory-bound work), from which
//    the simulator derives time with the hardware's roofline;
//  * its activation memory for a given sequence length and micro-batch.
// Units: element counts for parameters, FLOPs, bytes. Backward costs 2x forward FLOPs; a
// recomputed layer adds one more forward.
#ifndef ZPLAN_MODELS_MODEL_H_
#define ZPLAN_MODELS_MODEL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zplan::models {

enum class Family {
  kGpt,    // GPT-2 / GPT-3 shapes: learned positions, biases, LayerNorm, GeLU 4h MLP, tied
  kOpt,    // OPT: like GPT with ReLU, 2 extra positions, optional embedding projections
  kNeox,   // GPT-NeoX: rotary, untied embeddings, biases, LayerNorm, parallel residual
  kLlama,  // Llama / Mistral / Qwen2: RMSNorm, SwiGLU, GQA, rotary, no biases (Qwen2: qkv bias);
           // also the gated-MLP decoders built from the flags below (Mixtral, Qwen-MoE,
           // DeepSeek-V2, Gemma, Phi-3, Qwen3, OLMo-2)
  kGptj,   // GPT-J: parallel attention + MLP from one LayerNorm, rotary, q/k/v/out without bias,
           // MLP and LM head with bias, untied
  kFalcon, // Falcon: parallel attention + MLP (one or two LayerNorms), multi-query or grouped
           // q/k/v fused, no biases, tied
  kMlp,    // a stack of Linear(h, h) + ReLU layers with an MSE loss (the executor's real numerics)
};

enum class Norm { kLayerNorm, kRmsNorm };
// Which Hugging Face RMSNorm code a family runs (models/eager_ops.cc counts each): Llama's
// (LlamaRMSNorm, copied by most families) multiplies the weight after the cast back to the input
// dtype; Gemma's (GemmaRMSNorm, Gemma-2, Gemma-3) by (1 + weight) in fp32 before it; OLMo-2's
// (Olmo2RMSNorm, OLMo-3) by the weight in fp32 before it.
enum class RmsNormCode { kLlama, kGemma, kOlmo2 };
// kSwiglu is any gated MLP (SwiGLU, GeGLU): act(gate(x)) * up(x), then down.
enum class Activation { kGelu, kRelu, kSwiglu };
// Norms on the queries and keys before rotary: none; one RMSNorm of width head_dim shared by all
// heads (Qwen3); or RMSNorms over the whole query (A) and key (G) projections (OLMo-2).
enum class QkNorm { kNone, kPerHead, kFull };

// Lower-case names as zplan model files and listings spell them ("gpt", "opt", "neox", "llama",
// "gptj", "falcon", "mlp"; "layernorm", "rmsnorm"; "gelu", "relu", "swiglu").
const char* family_name(Family family);
const char* norm_name(Norm norm);
const char* activation_name(Activation activation);

// The shape of a model, as a preset or a Hugging Face config.json gives it.
struct ModelShape {
  std::string name;
  Family family = Family::kGpt;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;       // == heads without grouped-query attention
  int64_t head_dim = 0;       // hidden / heads unless the config says otherwise
  int64_t ffn = 0;            // MLP inner size
  int64_t vocab = 0;          // 0 for kMlp
  int64_t max_positions = 0;  // learned position embeddings; 0 with rotary positions
  bool tied_embeddings = false;
  bool linear_bias = false;  // biases on every attention and MLP linear
  bool qkv_bias = false;     // biases on q, k, v only (Qwen2)
  bool dropout = false;      // dropout masks are stored (Korthikanti's 1-byte masks)
  bool parallel_residual = false;
  // Additions for Hugging Face configs that the fields above cannot express:
  bool attention_dropout = true;  // with `dropout`: the attention probabilities are dropped too
                                  // (a*s*s mask and output without flash attention); OPT: false
  bool attn_out_bias = false;     // bias on the attention output projection only (Llama
                                  // attention_bias also sets qkv_bias)
  bool mlp_bias = false;          // biases on the MLP linears only (Llama mlp_bias, NeoX with
                                  // attention_bias=false)
  bool pre_norm = true;           // false: norms after each residual add (OPT-350m)
  bool final_norm = true;         // false: no norm before the LM head (OPT-350m)
  Norm norm = Norm::kLayerNorm;
  RmsNormCode rms_code = RmsNormCode::kLlama;  // with norm kRmsNorm
  // Liger-Kernel patches the family (its model_type is a key of MODEL_TYPE_TO_APPLY_LIGER_FN in
  // liger_kernel/transformers/monkey_patch.py): --loss liger runs its RMSNorm, rotary and SwiGLU
  // kernels (ComputeOp::fused by kLiger). A family it does not patch (Qwen v1's remote code,
  // GPT-2, DeepSeek-V2/V3, ...) runs unpatched under use_liger_kernel.
  bool liger = false;
  // The checkpoint's quantization_config quant_method ("mxfp4", "fp8", "bitsandbytes", ...;
  // empty: none). zplan plans every weight in the training precision whatever it says
  // (ModelShape carries it so that the plan can say so).
  std::string quant_method;
  Activation activation = Activation::kGelu;
  // The GeLU is transformers' tanh formula in Python (NewGELUActivation for "gelu_new", GPT-2's
  // and GPT-J's default; FastGELUActivation and AccurateGELUActivation alike): an eager chain of
  // 8 kernels (models/eager_ops.cc), where "gelu" and "gelu_pytorch_tanh" are F.gelu's one.
  bool gelu_formula = false;
  int64_t embed_proj_dim = 0;  // OPT-350m: word_embed_proj_dim != hidden adds two projections
  int64_t default_seq_len = 2048;
  // A rotary model's max_position_embeddings (0: not given): the context it was built for.
  int64_t context_length = 0;

  // The general decoder (issue 16): shapes of the families users train today.
  QkNorm qk_norm = QkNorm::kNone;
  bool post_sublayer_norm = false;  // norms on the attention and MLP outputs before each residual
                                    // add (Gemma-2 with pre_norm, OLMo-2 without input norms)
  bool glm_norm_names = false;      // the sandwich under GLM-4's names (Glm4DecoderLayer):
                                    // post_self_attn_layernorm, post_attention_layernorm before
                                    // the MLP, post_mlp_layernorm; else Gemma-2's
                                    // post_attention_layernorm, pre_/post_feedforward_layernorm
  bool qwen_names = false;          // Qwen v1's remote-code modules (QWenBlock): h, ln_1,
                                    // attn.c_attn, attn.c_proj, ln_2, mlp.w1 (up), mlp.w2 (gate),
                                    // mlp.c_proj, wte, ln_f; its attention is flash-attn 2
                                    // or its own eager code (no sdpa), eager softmaxing in the
                                    // compute dtype
  bool flash_attn_off = false;      // the config turns flash-attn off (Qwen v1 use_flash_attn
                                    // false)
  bool qwen_softmax_in_fp32 = false;  // Qwen v1 softmax_in_fp32: its eager softmax upcasts
  int64_t parallel_norms = 2;       // with parallel_residual: 1 = one norm feeds attention and
                                    // MLP (GPT-J, Falcon-7B), 2 = one each (NeoX, Falcon-40B)
  bool lm_head_bias = false;        // GPT-J's lm_head
  bool fused_qkv = false;           // q, k, v in one Linear (Phi-3 qkv_proj); same count
  bool fused_gate_up = false;       // gate and up in one Linear (Phi-3 gate_up_proj); same count

  // Mixture of experts (gated MLP experts). 0 experts = every block has the dense MLP of width
  // ffn. Otherwise every block from `dense_layers` on has a router Linear(h, experts) without
  // bias, `experts` MLPs of width expert_ffn of which each token uses experts_per_token, and
  // optionally one always-on shared MLP of width shared_expert_ffn (with a sigmoid gate
  // Linear(h, 1) when shared_expert_gate: Qwen2-MoE).
  int64_t experts = 0;
  int64_t experts_per_token = 0;
  int64_t expert_ffn = 0;
  int64_t shared_expert_ffn = 0;
  bool shared_expert_gate = false;
  int64_t dense_layers = 0;  // DeepSeek first_k_dense_replace: the first blocks keep dense MLPs
  // The Hugging Face class of the sparse MoE block, fully qualified, and the attribute that holds
  // it in each decoder layer, as transformers 4.x names them (Mixtral:
  // transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock at block_sparse_moe;
  // Qwen2-MoE, Qwen3-MoE and DeepSeek-V2 at mlp): what zero_optimization.leaf_module matches.
  // build_model gives an MoE shape without them Mixtral's.
  std::string moe_block_class;
  std::string moe_block_name;
  // The experts' layout (transformers 5, which keeps them as 3D tensors in one module, against
  // 4.x's nn.ModuleList of expert MLPs): false builds 4.x's per-expert Linears and their Python
  // loop; true builds <block>.experts with gate_up_proj [E, 2f, h] and down_proj [E, h, f] run by
  // torch._grouped_mm (transformers' default experts_implementation, "grouped_mm"), its router
  // a TopKRouter module of its own rather than an nn.Linear (except DeepSeek-V2's, whose gate
  // stays an nn.Linear: router_linear).
  bool fused_experts = false;
  bool router_linear = true;
  // With fused_experts: the 3D tensors run by the modeling code's Python loop over the experts a
  // micro-batch reaches, a GEMM on each expert's slice (GPT-OSS under transformers 4.x, whose
  // GptOssExperts was 3D from the start), instead of grouped_mm.
  bool expert_loop = false;
  // GPT-OSS's MoE (GptOssMLP): `router` (GptOssTopKRouter, weight and bias) in place of `gate`,
  // biases on the experts' tensors (gate_up_proj_bias [E, 2f], down_proj_bias [E, h]), and the
  // clamped SwiGLU (gate.clamp, up.clamp, gate * sigmoid(1.702 gate) * (up + 1)).
  bool gpt_oss_experts = false;
  // GPT-OSS's attention sinks: self_attn.sinks, one logit per head joined to every row of the
  // scores before the softmax (GptOssAttention); transformers runs them in eager attention or
  // the kernels-community/vllm-flash-attn3 kernel only (no sdpa).
  bool attention_sinks = false;
  // Llama 4 (Llama4TextMoe): every routed expert runs on every token -- the tokens repeated E
  // times, each copy scaled by its sigmoid router score (0 where the expert was not picked),
  // one torch.bmm over [E, T, h] for gate_up_proj and one for down_proj, the E outputs summed
  // -- so the experts' FLOPs and activations are E times a token's, not experts_per_token
  // times; in every transformers release that has the model.
  bool dense_experts = false;
  // MoE in every moe_layer_step-th block from dense_layers on (Llama 4's
  // interleave_moe_layer_step: blocks step - 1, 2 * step - 1, ...); the others dense.
  int64_t moe_layer_step = 1;
  // Rows a token sends through the routed experts: experts_per_token, or every expert's copy.
  int64_t routed_rows_per_token() const { return dense_experts ? experts : experts_per_token; }
  // Whether block i (0-based) holds the sparse MoE block.
  bool moe_layer(int64_t i) const {
    return experts > 0 && i >= dense_layers &&
           (i - dense_layers) % moe_layer_step == moe_layer_step - 1;
  }

  // Multi-head latent attention (DeepSeek-V2). kv_lora_rank 0 = ordinary attention. Queries:
  // q_proj (q_lora_rank 0) or q_a_proj -> q_a_layernorm -> q_b_proj; keys and values from a
  // kv_lora_rank latent plus a shared qk_rope_head_dim rotary key (kv_a_proj_with_mqa ->
  // kv_a_layernorm -> kv_b_proj); heads * v_head_dim into o_proj.
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;

  // Gemma-2's soft-capping (Gemma2Config attn_logit_softcapping 50, final_logit_softcapping 30;
  // null = none): x -> cap * tanh(x / cap) on the attention scores (eager attention and flash-attn
  // >= 2.6; transformers' sdpa path drops it) and on the logits. 0 = none. The tanh saves its
  // output for backward (activations.cc).
  double attn_logit_softcapping = 0;
  double final_logit_softcapping = 0;

  bool moe() const { return experts > 0; }
  // moe_block_class without its module path ("MixtralSparseMoeBlock"): __class__.__name__.
  std::string moe_block_class_name() const {
    return moe_block_class.substr(moe_block_class.rfind('.') + 1);
  }
  bool mla() const { return kv_lora_rank > 0; }
  // Eager (non-fused) attention softmaxes in fp32 and casts back: Hugging Face's
  // eager_attention_forward of the Llama family (softmax(..., dtype=torch.float32).to(dtype)).
  // GPT-2, OPT and GPT-NeoX's _attn softmax in the compute dtype, as does Qwen v1's
  // QWenAttention._attn.
  bool eager_softmax_upcast() const {
    return family == Family::kLlama && (!qwen_names || qwen_softmax_in_fp32);
  }
  // The attention probabilities are dropped out (a 1-byte mask and a dropped copy per score).
  bool attention_probs_dropout() const { return dropout && attention_dropout; }
};

// The longest sequence the model's learned position table embeds: its rows, less the 2 that
// OPT's OPTLearnedPositionalEmbedding offsets every position by; 0 with rotary or no positions
// (no table to index past). A longer sequence fails the embedding lookup in transformers.
inline int64_t learned_position_limit(const ModelShape& s) {
  if (s.max_positions == 0) return 0;
  return s.family == Family::kOpt ? s.max_positions - 2 : s.max_positions;
}

struct Param {
  std::string name;
  int64_t numel = 0;
  // requires_grad: false for a frozen parameter (models/finetune.h), which has no gradient and
  // no optimizer states but is still stored, partitioned and gathered like the others.
  bool trainable = true;
};

// A module that directly owns parameters (a Linear, an Embedding, a norm).
struct Module {
  std::string name;
  std::vector<Param> params;
  // Non-empty when these parameters are the same tensors as another module's (a tied LM head
  // uses the embedding matrix): they are gathered again where used, but stored and counted once.
  std::string tied_to;
  // A LayerNorm or RMSNorm (its weight and bias): models/activations.cc reads whether it trains.
  bool norm = false;
  // One of the modules of the layer's sparse MoE block (its router, experts and shared expert):
  // ZeRO-3 gathers them one by one, or all at once where it treats the block as a leaf
  // (sim/zero_sizes.cc).
  bool moe_block = false;

  int64_t numel() const;
  int64_t trainable_numel() const;  // of the trainable params
};

enum class OpKind {
  kGemm,         // [T x k] x [k x n], T = tokens: 2*T*n*k FLOPs
  kAttention,    // QK^T and AV over the sequence: 4*T*s*heads*head_dim FLOPs (causal mask not
                 // discounted, as Megatron-LM counts model FLOPs)
  kMemoryBound,  // norms, activations, softmax, embedding lookup: HBM traffic only
};

// How AutoTP training lays an operation (and the module it reads) out over the ranks of a
// tensor-parallel group (models/tensor_parallel.h; DeepSpeed 0.19.5 module_inject/layers.py).
enum class TpSplit : uint8_t {
  kReplicated,  // every rank holds and runs it whole: embeddings, norms, residual adds, dropout,
                // the LM head, everything outside a block's attention and MLP
  kColumn,      // a Linear split by output features (LinearLayer): weight and bias 1/tp; the
                // backward all-reduces its input gradient (ColumnParallel.backward)
  kRow,         // a Linear split by input features (LinearAllreduce): weight 1/tp, bias whole;
                // the forward all-reduces its output (RowParallel.forward)
  kSplit,       // work on split activations: attention over heads/tp, rotary, the MLP's
                // activation function, q/k norms per head -- 1/tp of it on each rank
};

// A fused kernel that can run an elementwise chain of the model's code in its place, when the
// step has it (ComputeOp::fused).
enum class FusedBy : uint8_t {
  kNone,
  kLiger,      // Liger-Kernel's patch of the model (--loss liger): LigerRMSNorm, its rotary
               // (liger_rotary_pos_emb) and its SwiGLU (LigerSiLUMulFunction)
  kFlashAttn,  // flash-attn's own kernel, which the model's code imports with FlashAttention-2
               // (Qwen v1's rotary: flash_attn.layers.rotary.apply_rotary_emb_func)
};

// One forward compute operation of a layer.
struct ComputeOp {
  std::string name;
  OpKind kind = OpKind::kGemm;
  int64_t n = 0, k = 0;             // kGemm
  int64_t heads = 0, head_dim = 0;  // kAttention (head_dim: of queries and keys)
  int64_t value_dim = 0;            // kAttention: of values, 0 = head_dim (MLA: v_head_dim)
  double bytes_per_token = 0;       // kMemoryBound: bytes read + written per token
  // kMemoryBound: bytes its backward reads and writes per token; < 0: twice the forward's (the
  // saved activation and the incoming gradient read, the input gradient written).
  double backward_bytes_per_token = -1;
  double backward_bytes() const {
    return backward_bytes_per_token < 0 ? 2 * bytes_per_token : backward_bytes_per_token;
  }
  // kMemoryBound: the kernels its forward launches as the model's code runs it (an eager chain:
  // Hugging Face's RMSNorm is 8, models/eager_ops.cc), each one launch on the GPU and one
  // operator the host issues (docs/cost_model.md §14); bytes_per_token is the chain's total.
  // backward_kernels < 0: two per forward kernel.
  int kernels = 1;
  int backward_kernels = -1;
  int backward_kernel_count() const { return backward_kernels < 0 ? 2 * kernels : backward_kernels; }
  // kMemoryBound: the one kernel that runs it instead where the step has it (`by`), with what it
  // moves per token (16-bit, like bytes_per_token) and its kernels each way; kernels 0: another
  // op's fused kernel does this one's work (the SiLU inside Liger's SwiGLU).
  struct Fused {
    FusedBy by = FusedBy::kNone;
    double bytes_per_token = 0;
    double backward_bytes_per_token = 0;
    int kernels = 1;
    bool operator==(const Fused&) const = default;
  };
  Fused fused;
  int module = -1;                  // index in Layer::modules of the parameters it reads
  // kGemm: rows per token. 1, or experts_per_token / experts for a routed expert of a mixture
  // of experts: each token passes through experts_per_token of them, and the experts are taken
  // as balanced, so each expert's GEMM runs T * k / E rows.
  double token_factor = 1;
  // kGemm: the weight does not require grad (a frozen linear, models/finetune.h), so backward
  // computes only the input gradient dX = dY W^T: 1x the forward FLOPs instead of 2x.
  bool frozen_weight = false;
  // kGemm: one torch._grouped_mm over `groups` equal GEMMs, the routed rows split evenly among
  // them (transformers 5's experts): each group's GEMM is priced at its own shape, one launch.
  int64_t groups = 1;
  // kGemm with groups: a torch.bmm over the groups (Llama 4's experts), one kernel on every GPU
  // (a grouped GEMM is one kernel only on Hopper and Blackwell, sim/step_costs.cc).
  bool batched = false;
  // kGemm: the share of its FLOPs that are the model's (what MFU counts): 1, or k / E for
  // Llama 4's bmm over every token's E expert copies, of which the router keeps k (the others
  // are computed and scaled by 0: hardware FLOPs, not model FLOPs).
  double model_flops_fraction = 1;
  // kGemm: the weight is an nn.Linear's, so PEFT's target_modules can wrap it (not the 3D
  // expert tensors or a TopKRouter's weight of transformers 5).
  bool peft_linear = true;
  TpSplit tp = TpSplit::kReplicated;  // its layout under AutoTP
};

enum class LayerKind { kEmbedding, kBlock, kFinalNorm, kLmHead, kLinear };

// Inputs of a block's linears, by what reads them (models/activations.cc counts each once).
struct FrozenInputs {
  bool attention_in = false;  // the q/k/v (or fused qkv, MLA q/kv_a) input: the norm output
  bool out_in = false;        // the output projection's input (the attention output)
  bool mlp_in = false;        // the up/gate/fc1 (and router) input: the second norm's output
  bool down_in = false;       // the down/fc2 input (the activation's product)
};

// What is trained of the model (models/finetune.h builds it from --lora-rank, --lora-targets and
// --trainable). Empty = full fine-tuning, every parameter trainable.
struct FineTune {
  int64_t lora_rank = 0;                  // 0: no LoRA
  std::vector<std::string> lora_targets;  // as given (PEFT spellings or "all-linear")
  double trainable_fraction = 1;          // < 1: whole layers frozen from the bottom
  // PEFT's lora_dropout: 0 builds nn.Identity (lora_A reads the base linear's input itself);
  // p > 0 an nn.Dropout per adapter, whose output lora_A saves and whose mask backward reads.
  double lora_dropout = 0;
  // PEFT's modules_to_save with LoRA: the embedding or LM head modules (by name, or its end after
  // a dot) trained in full as ModulesToSaveWrapper does: a trainable copy runs in their place,
  // the original stays stored and frozen.
  std::vector<std::string> modules_to_save;
  // Filled by apply_finetune: the block linears the targets selected, by their own last names
  // in forward order ("query_key_value" for Falcon's q_proj,v_proj).
  std::vector<std::string> lora_linears;

  bool lora() const { return lora_rank > 0; }
  bool frozen() const { return lora() || trainable_fraction < 1; }
};

struct Layer {
  std::string name;
  LayerKind kind = LayerKind::kBlock;
  std::vector<Module> modules;  // forward order
  std::vector<ComputeOp> ops;   // forward order
  bool checkpointed_unit = false;  // activation checkpointing wraps this layer (blocks, linears)
  bool moe_block = false;          // a block whose MLP is the mixture of experts
  // Fine-tuning (models/finetune.h). no_grad: nothing in or before this layer is trainable, so
  // autograd records nothing here: no stored activations and no backward.
  bool no_grad = false;
  // Linear inputs no backward needs any more because every linear reading them is frozen and
  // carries no adapter (PyTorch saves a matmul operand only for the other operand's gradient).
  FrozenInputs unsaved = {};
  // Elements per token the LoRA adapters keep: each adapter's lora_A output (rank r), which
  // lora_B saves for its weight gradient, times the rows per token (experts_per_token).
  double adapter_elements = 0;
  // Bytes per token more with lora_dropout > 0: each adapter's boolean dropout mask (1 byte per
  // input element), its dropped copy being in adapter_elements.
  double adapter_mask_bytes = 0;

  int64_t numel() const;            // parameters owned here (tied modules excluded)
  int64_t trainable_numel() const;  // the trainable ones among them
};

// How activations are kept.
struct ActivationOptions {
  bool flash_attention = true;  // fused attention: no a*s*s score tensors are stored
  int dtype_bytes = 2;          // 2 for fp16/bf16 training, 4 for fp32
  bool fused_loss = false;      // fused linear + cross-entropy: no [T x V] logits are stored
  bool fused_swiglu = false;    // Liger's SwiGLU kernel: the MLP keeps gate and up only
  // Liger's RMSNorm kernel (LigerRMSNorm, installed with its SwiGLU by --loss liger): keeps
  // its input in the compute dtype. Without it an RMSNorm model runs Hugging Face's
  // LlamaRMSNorm, which keeps an fp32 copy of its input (activations.cc).
  bool fused_rmsnorm = false;
  bool loss_upcast = true;      // the unfused loss upcasts the logits to fp32 first
  // Ulysses sequence parallelism over this many ranks: `seq` is the rank's s/sp tokens, but
  // eager attention's score tensors are heads/sp x s x s (after the all-to-all), sp times the
  // a x (s/sp)^2 the local tokens alone would give.
  int64_t sequence_parallel = 1;
};

// Activation bytes of one layer for one micro-batch (b sequences of s tokens).
struct LayerActivations {
  double stored_bytes = 0;      // kept from this layer's forward until its backward
  double checkpoint_bytes = 0;  // kept instead under full checkpointing (the layer input);
                                // equals stored_bytes for layers that are not checkpointed
  double workspace_bytes = 0;   // transient extra while its forward or backward runs (gradient
                                // tensors of its activations, fp32 logits for the loss, ...)
};

class Model {
 public:
  // `tensor_parallel` > 1: `layers` are what one rank of an AutoTP group of that size holds and
  // runs (tensor_parallel_shard builds them, giving the whole model's parameter count); the
  // shape stays the whole model's.
  Model(ModelShape shape, std::vector<Layer> layers, int tensor_parallel = 1,
        int64_t whole_params = 0);

  const ModelShape& shape() const { return shape_; }
  const std::string& name() const { return shape_.name; }
  const std::vector<Layer>& layers() const { return layers_; }

  // Total trainable parameters, tied tensors counted once (DeepSpeed's total_params). With
  // experts: all of them (what memory and ZeRO partitioning hold).
  int64_t num_params() const { return num_params_; }
  // Parameters that require grad (tied tensors once): num_params unless some are frozen.
  int64_t trainable_params() const { return trainable_params_; }
  // How the model was prepared for training (models/finetune.h); default: full fine-tuning.
  const FineTune& finetune() const { return finetune_; }
  void set_finetune(FineTune finetune) { finetune_ = std::move(finetune); }
  // Parameters one token uses: num_params less the routed experts it does not visit
  // ((experts - experts_per_token) of every MoE block). Equals num_params without experts.
  int64_t active_params() const { return active_params_; }
  // Largest number of parameters owned directly by one module (DeepSpeed's largest_layer_params).
  int64_t largest_module_params() const { return largest_module_params_; }
  // Largest single parameter tensor (ZeRO-Offload's temp gradient buffers are sized by it).
  int64_t largest_param_numel() const { return largest_param_numel_; }
  // Number of parameter tensors (tied ones once).
  int64_t num_param_tensors() const { return num_param_tensors_; }
  // The AutoTP group size this model is one rank's shard of (models/tensor_parallel.h); 1 for
  // a whole model. Parameter counts, FLOPs and activations above and below are per rank.
  int tensor_parallel() const { return tensor_parallel_; }
  // The whole model's num_params: num_params() itself unless this is a tensor-parallel shard.
  int64_t whole_params() const { return whole_params_; }

  // Forward FLOPs of one layer, and of the whole model, for `batch` sequences of `seq` tokens.
  double layer_forward_flops(size_t layer, int64_t seq, int64_t batch) const;
  double forward_flops(int64_t seq, int64_t batch) const;
  // This rank's share of the whole model's forward FLOPs (what MFU counts): forward_flops, less
  // (1 - 1/tp) of the GEMMs every rank of a tensor-parallel group runs whole (TpSplit::
  // kReplicated, the LM head). forward_flops itself at tensor_parallel 1.
  double forward_flops_share(int64_t seq, int64_t batch) const;

  LayerActivations layer_activations(size_t layer, int64_t seq, int64_t batch,
                                     const ActivationOptions& options) const;

 private:
  ModelShape shape_;
  std::vector<Layer> layers_;
  int64_t num_params_ = 0;
  int64_t trainable_params_ = 0;
  FineTune finetune_;
  int64_t active_params_ = 0;
  int64_t largest_module_params_ = 0;
  int64_t largest_param_numel_ = 0;
  int64_t num_param_tensors_ = 0;
  int tensor_parallel_ = 1;
  int64_t whole_params_ = 0;
};

// Builds the layers of a model from its shape. Throws InputError (naming `where`) when the shape
// is inconsistent (heads not dividing hidden, kv_heads not dividing heads, zero sizes).
// The returned model's shape has kv_heads and head_dim filled in (0 means heads and
// hidden / heads). docs/models.md lists the layers, modules and ops built for each family.
Model build_model(const ModelShape& shape, const std::string& where);

}  // namespace zplan::models

#endif  // ZPLAN_MODELS_MODEL_H_
