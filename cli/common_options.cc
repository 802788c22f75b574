#include "cli/common_options.h"

#include <cctype>
#include <cmath>
#include <iostream>

#include "base/text.h"
#include "models/catalog.h"
#include "models/finetune.h"
#include "base/input_error.h"
#include "sim/knobs.h"
#include "sim/sequence_parallel.h"
#include "sim/tensor_parallel.h"
#include "models/tensor_parallel.h"
#include "sim/zeropp_mics.h"
#include "sim/swap_buffers.h"

namespace zplan::cli {

void add_setup_options(CLI::App& app, SetupOptions& o, bool zero_flags) {
  app.add_option("--model", o.model,
                 "model: a preset name (zplan models), a Hugging Face config.json, or a zplan "
                 "model file")
      ->required();
  app.add_option("--hw", o.hw, "hardware profile: a stock name (a100, h100, ...) or a JSON file")
      ->required();
  app.add_option("--gpus", o.gpus, "total number of GPUs (data-parallel ranks)")->required();
  app.add_option("--nodes", o.nodes, "number of nodes the GPUs are spread over")
      ->capture_default_str();
  app.add_option("--seq-len", o.seq_len, "sequence length (default: the model's)");
  app.add_option("--micro-batch", o.micro_batch, "train_micro_batch_size_per_gpu");
  app.add_option("--gas", o.gradient_accumulation, "gradient_accumulation_steps");
  app.add_option("--global-batch", o.global_batch, "train_batch_size (samples per optimizer step)");
  app.add_option("--precision", o.precision,
                 "bf16, fp16 or fp32 (default: bf16; fp16 on GPUs without bf16, such as V100)");
  app.add_option("--checkpointing", o.checkpointing,
                 "activation checkpointing: none, full, or cpu (full with cpu_checkpointing: "
                 "checkpoints in host memory) (default: the ds_config's)");
  app.add_option("--attention", o.attention,
                 "the model's attn_implementation: eager, sdpa, flash_attention_2 (flash2) or "
                 "flash_attention_3 (flash3) (default: sdpa, Hugging Face's default)");
  app.add_flag("--no-flash-attention", o.no_flash_attention, "the same as --attention eager");
  app.add_option("--loss", o.loss,
                 "standard (logits materialized, upcast to fp32), no-upcast (the loss on the "
                 "16-bit logits, as transformers' GPT-2 before the upcast), fused (a fused "
                 "linear + cross-entropy kernel such as Liger's) or liger (Liger-Kernel's "
                 "patches: the fused loss and its SwiGLU, RMSNorm and rotary kernels; for the "
                 "model types Liger patches) (default: standard)");
  app.add_option("--transformers", o.transformers,
                 "the transformers release the training runs, 5 or 4 (or a version such as "
                 "4.57.1): it lays out a mixture of experts (5: the experts' 3D tensors in one "
                 "module under grouped_mm; 4: one module of Linears per expert) (default: 5)")
      ->check([](const std::string& v) {
        // Empty is how SetupOptions says "not given"; given empty, it is a mistake.
        return v.empty() ? std::string("must be 5 or 4 (a transformers release, e.g. 4.57.1), "
                                       "got ''")
                         : std::string();
      });
  app.add_flag("--no-zero-init", o.no_zero_init,
               "stage 3: the model is built outside deepspeed.zero.Init (from_pretrained without "
               "HfDeepSpeedConfig, then deepspeed.initialize(model=...)): the engine moves it "
               "whole to the GPU before partitioning it, a peak before the first step");
  app.add_option("--lora-rank", o.lora_rank,
                 "train LoRA adapters of this rank (PEFT), every base weight frozen");
  app.add_option("--lora-dropout", o.lora_dropout,
                 "with --lora-rank: PEFT's lora_dropout p (default 0, PEFT's default: no copy); "
                 "p > 0 keeps each adapter's dropped input and its mask for backward");
  app.add_option("--lora-modules-to-save", o.lora_modules_to_save,
                 "with --lora-rank: PEFT's modules_to_save, the embedding or LM head modules "
                 "trained in full (e.g. embed_tokens,lm_head; a trainable copy of each)");
  app.add_option("--lora-targets", o.lora_targets,
                 std::string("with --lora-rank: comma list of the linears that get adapters, as "
                             "PEFT names them: q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,"
                             "down_proj, a module's own name (c_attn, query_key_value, ...) or "
                             "all-linear (default: ") +
                     models::kDefaultLoraTargets + ", PEFT's LLaMA default)");
  app.add_option("--trainable", o.trainable,
                 "fraction of the parameters trained, the rest frozen as whole layers from the "
                 "bottom (embedding first) (default: 1)");
  if (!zero_flags) return;
  app.add_option("--ds-config", o.ds_config, "a DeepSpeed ds_config.json to read");
  app.add_option("--stage", o.stage,
                 "ZeRO stage 0-3 (instead of --ds-config; with it, fills \"stage\": \"auto\")");
  app.add_option("--offload-optimizer", o.offload_optimizer, "none, cpu or nvme");
  app.add_option("--offload-param", o.offload_param, "none, cpu or nvme (stage 3)");
  app.add_option("--reduce-bucket", o.reduce_bucket_size, "reduce_bucket_size (elements)");
  app.add_option("--allgather-bucket", o.allgather_bucket_size, "allgather_bucket_size (elements)");
  app.add_option("--prefetch-bucket", o.prefetch_bucket_size,
                 "stage3_prefetch_bucket_size (elements)");
  app.add_option("--max-live", o.max_live_parameters, "stage3_max_live_parameters (elements)");
  app.add_option("--persistence-threshold", o.param_persistence_threshold,
                 "stage3_param_persistence_threshold (elements)");
  app.add_option("--sub-group-size", o.sub_group_size,
                 "sub_group_size (elements; with --ds-config, replaces the file's)");
  app.add_option("--overlap-comm", o.overlap_comm, "overlap_comm: true or false");
  app.add_option("--autotp", o.autotp,
                 "tensor_parallel.autotp_size: AutoTP training, each layer's weights split over "
                 "this many GPUs of a node, ZeRO over the GPUs / it (default: 1, off)");
  app.add_option("--client-optimizer", o.client_optimizer,
                 "without an optimizer block, the script's AdamW as it updates on the GPU: fused "
                 "(one kernel: torch's fused=True, the Trainer's adamw_torch_fused, its default "
                 "with torch >= 2.8) or foreach (torch.optim.AdamW's default, the Trainer's "
                 "adamw_torch: a pass per operation and a denominator of the stepped size) "
                 "(default: fused)");
  app.add_option("--nvme-path", o.nvme_path,
                 "nvme_path of NVMe offload (a setting of the config: nothing is written there)")
      ->capture_default_str();
}

std::vector<std::pair<std::string, std::string>> setup_inputs(const SetupOptions& o) {
  return {{"--model", models::model_file_of(o.model)},
          {"--hw", o.hw},
          {"--ds-config", o.ds_config}};
}

bool any_zero_flag(const SetupOptions& o) {
  return o.stage || !o.offload_optimizer.empty() || !o.offload_param.empty() ||
         o.reduce_bucket_size || o.allgather_bucket_size || o.prefetch_bucket_size ||
         o.max_live_parameters || o.param_persistence_threshold || o.sub_group_size ||
         o.overlap_comm || o.autotp;
}

sim::Precision parse_precision(const std::string& text, const std::string& flag) {
  const std::string t = ascii_lower(text);
  if (t == "bf16") return sim::Precision::kBf16;
  if (t == "fp16") return sim::Precision::kFp16;
  if (t == "fp32") return sim::Precision::kFp32;
  throw InputError(flag, "must be bf16, fp16 or fp32, got '" + text + "'");
}

sim::Precision resolve_precision(const SetupOptions& o, const hardware::GpuSpec& gpu) {
  sim::Precision p =
      gpu.arch == hardware::Arch::kVolta ? sim::Precision::kFp16 : sim::Precision::kBf16;
  if (!o.precision.empty()) {
    p = parse_precision(o.precision, "--precision");
  } else if (!o.default_precision.empty()) {
    p = parse_precision(o.default_precision, "--precision");
  }
  check_precision_runs(p, gpu, "--precision");
  return p;
}

void check_precision_runs(sim::Precision p, const hardware::GpuSpec& gpu,
                          const std::string& where) {
  // Volta (sm70) has fp16 tensor cores only. PyTorch runs bf16 there without complaint, but
  // without tensor cores, at a small fraction of the fp16 rate gpu.peak_flops_per_s describes,
  // so every time zplan printed would be several times too short.
  if (p == sim::Precision::kBf16 && gpu.arch == hardware::Arch::kVolta) {
    throw InputError(where, "bf16 on " + gpu.name +
                                ", which has no bf16 tensor cores (Volta): PyTorch runs it there "
                                "without them, far slower than the profile's fp16 rate; train in "
                                "fp16 (--precision fp16, or \"fp16\": {\"enabled\": true})");
  }
}

sim::OffloadDevice parse_offload(const std::string& text, const std::string& flag) {
  if (text.empty()) return sim::OffloadDevice::kNone;
  // The knob's reading, as the planner's --offload-* lists read it (0 none, 1 cpu, 2 nvme).
  return static_cast<sim::OffloadDevice>(
      sim::parse_knob_value(sim::Knob::kOffloadOptimizer, text, flag));
}

std::optional<int64_t> parse_checkpointing(const std::string& text) {
  if (text.empty()) return std::nullopt;
  return sim::parse_knob_value(sim::Knob::kCheckpointing, text, "--checkpointing");
}

void apply_checkpointing(int64_t value, sim::ActivationCheckpointingConfig& ac) {
  ac.enabled = value != 0;
  if (value == 2) ac.cpu_checkpointing = true;
}

models::FineTune resolve_finetune(const SetupOptions& o) {
  models::FineTune ft;
  if (o.lora_rank) {
    if (*o.lora_rank < 1) {
      throw InputError("--lora-rank", "must be a positive integer (the adapters' rank r), got " +
                                          std::to_string(*o.lora_rank));
    }
    ft.lora_rank = *o.lora_rank;
    ft.lora_targets = models::parse_lora_targets(o.lora_targets.value_or(
        models::kDefaultLoraTargets));
  } else if (o.lora_targets) {
    throw InputError("--lora-targets", "needs --lora-rank (the adapters' rank)");
  }
  if (o.lora_dropout) {
    if (!o.lora_rank) throw InputError("--lora-dropout", "needs --lora-rank (the adapters' rank)");
    if (!(*o.lora_dropout >= 0 && *o.lora_dropout < 1)) {
      throw InputError("--lora-dropout",
                       strformat("must be a probability in [0, 1), got %g", *o.lora_dropout));
    }
    ft.lora_dropout = *o.lora_dropout;
  }
  if (o.lora_modules_to_save) {
    if (!o.lora_rank) {
      throw InputError("--lora-modules-to-save", "needs --lora-rank (the adapters' rank)");
    }
    ft.modules_to_save = models::parse_modules_to_save(*o.lora_modules_to_save);
  }
  if (o.trainable) {
    if (!(*o.trainable > 0 && *o.trainable <= 1)) {
      throw InputError("--trainable", strformat("must be a fraction in (0, 1], got %g",
                                                *o.trainable));
    }
    if (o.lora_rank) {
      throw InputError("--trainable", "cannot be combined with --lora-rank (LoRA trains the "
                                      "adapters only; every base weight is frozen)");
    }
    ft.trainable_fraction = *o.trainable;
  }
  return ft;
}

int resolve_transformers(const SetupOptions& o) {
  if (o.transformers.empty()) return models::kDefaultTransformers;
  // "5", or a release as pip names it: "4.57.1", "5.0.0rc1", "4.57.1+cu121".
  const std::string& t = o.transformers;
  const bool major_ok = t[0] == '4' || t[0] == '5';
  const bool rest_ok = t.size() == 1 || (t[1] == '.' && t.size() > 2 &&
                                         std::isdigit(static_cast<unsigned char>(t[2])) != 0);
  if (major_ok && rest_ok && t.find("..") == std::string::npos) return t[0] - '0';
  throw InputError("--transformers", "must be 5 or 4 (a transformers release, e.g. 4.57.1), "
                                     "got '" + o.transformers + "'");
}

models::Model resolve_model(const SetupOptions& o) {
  // The flags are checked before the model is loaded: a bad flag is reported as such.
  const models::FineTune ft = resolve_finetune(o);
  const int transformers = resolve_transformers(o);
  return models::apply_finetune(models::load_model(o.model, transformers), ft);
}

hardware::Cluster resolve_cluster(const SetupOptions& o) {
  return hardware::make_cluster(hardware::load_profile(o.hw), o.gpus, o.nodes);
}

sim::Workload resolve_workload(const SetupOptions& o, const models::Model& model) {
  sim::Workload w;
  // 2^24 = 16.8M tokens: past the longest context of any released model (Llama 4 Scout, 10M).
  // A longer one is a typo, and 2^31 overflowed the simulator's clock.
  constexpr int64_t kMaxSeqLen = int64_t{1} << 24;
  if (o.seq_len != kModelSeqLen && (o.seq_len < 1 || o.seq_len > kMaxSeqLen)) {
    throw InputError("--seq-len", std::to_string(o.seq_len) + " is out of range (1 to " +
                                      std::to_string(kMaxSeqLen) + " tokens)");
  }
  w.seq_len = o.seq_len != kModelSeqLen ? o.seq_len : model.shape().default_seq_len;
  if (const int64_t limit = models::learned_position_limit(model.shape());
      limit > 0 && w.seq_len > limit) {
    throw InputError("--seq-len", std::to_string(w.seq_len) + " tokens is longer than " +
                                      model.shape().name + "'s learned position table (" +
                                      std::to_string(limit) +
                                      " positions: n_positions or max_position_embeddings in its "
                                      "config): the embedding lookup would fail; shorten the "
                                      "sequence or give the model a larger table");
  }
  if (!o.attention.empty()) {
    std::optional<sim::Attention> a = sim::attention_from_name(o.attention);
    if (!a) {
      throw InputError("--attention", "must be eager, sdpa, flash_attention_2 (flash2) or "
                                      "flash_attention_3 (flash3), got '" + o.attention + "'");
    }
    if (o.no_flash_attention && *a != sim::Attention::kEager) {
      throw InputError("--no-flash-attention", std::string("contradicts --attention ") +
                                                   sim::attention_name(*a));
    }
    w.attention = *a;
  } else if (o.no_flash_attention) {
    w.attention = sim::Attention::kEager;
  }
  if (model.shape().attention_sinks) {
    // GptOssPreTrainedModel: _supports_sdpa False, and of the flash kernels only
    // kernels-community/vllm-flash-attn3 (_compatible_flash_implementations) joins the sinks, so
    // from_pretrained without attn_implementation falls back to eager.
    if (o.attention.empty() && !o.no_flash_attention) {
      w.attention = sim::Attention::kEager;
    } else if (w.attention == sim::Attention::kSdpa || w.attention == sim::Attention::kFlash2) {
      throw InputError("--attention", model.shape().name + "'s attention sinks run in eager "
                                      "attention or the kernels-community/vllm-flash-attn3 kernel "
                                      "(flash_attention_3) only: transformers has no sdpa or "
                                      "flash-attn 2 path for them");
    }
  }
  if (model.shape().qwen_names) {
    // Qwen v1's modeling_qwen.py reads no attn_implementation: it runs flash-attn 2's varlen
    // kernel when use_flash_attn allows and the package imports, else QWenAttention._attn. The
    // default (flash-attn when the model is 16-bit, as use_flash_attn "auto" does) is settled in
    // resolve_setup once the precision and GPU are known (settle_remote_attention).
    const std::string& name = model.shape().name;
    if (o.attention.empty() && !o.no_flash_attention) {
      w.attention = model.shape().flash_attn_off ? sim::Attention::kEager : sim::Attention::kFlash2;
    } else if (w.attention == sim::Attention::kSdpa || w.attention == sim::Attention::kFlash3) {
      throw InputError("--attention", name + " is Qwen v1's remote code (modeling_qwen.py), "
                                      "which runs flash-attn 2 or its own eager attention only: "
                                      "give flash_attention_2 or eager");
    } else if (w.attention == sim::Attention::kFlash2 && model.shape().flash_attn_off) {
      throw InputError("--attention", name + "'s config sets use_flash_attn false, so its "
                                      "remote code runs eager attention; set it to \"auto\" "
                                      "or true to plan flash_attention_2");
    }
  }
  const std::string loss = ascii_lower(o.loss);
  if (loss == "liger" && !model.shape().liger) {
    throw InputError("--loss", "liger: Liger-Kernel has no patch for " + model.shape().name +
                                   "'s model type (use_liger_kernel leaves it unpatched, with a "
                                   "warning); plan it with --loss standard, or --loss fused if "
                                   "your code calls LigerFusedLinearCrossEntropyLoss itself");
  }
  if (loss == "fused" || loss == "liger") {
    w.fused_loss = true;
    w.fused_swiglu = loss == "liger";
  } else if (loss == "no-upcast") {
    w.loss_upcast = false;
  } else if (!loss.empty() && loss != "standard") {
    throw InputError("--loss",
                     "must be standard, no-upcast, fused or liger, got '" + o.loss + "'");
  }
  w.zero_init = !o.no_zero_init;
  return w;
}

std::string settle_remote_attention(const SetupOptions& o, const models::Model& model,
                                    sim::Workload& w, sim::Precision p,
                                    const hardware::GpuSpec& gpu) {
  if (!model.shape().qwen_names || !o.attention.empty() || o.no_flash_attention) return "";
  const bool flash_runs = p != sim::Precision::kFp32 && hardware::runs_flash_attn_2(gpu.arch);
  if (w.attention == sim::Attention::kFlash2 && !flash_runs) w.attention = sim::Attention::kEager;
  const std::string head = model.name() + " is Qwen v1's remote code, which runs flash-attn 2 "
                           "when the flash_attn package imports (use_flash_attn \"auto\" on a "
                           "16-bit model) and its own eager attention otherwise, never sdpa: ";
  if (w.attention == sim::Attention::kFlash2) {
    return head + "planned with flash-attn 2 installed; --attention eager if it is not";
  }
  return head + "planned with eager attention (" +
         (model.shape().flash_attn_off ? std::string("its config sets use_flash_attn false")
          : p == sim::Precision::kFp32 ? std::string("flash-attn does not run in fp32")
                                       : "flash-attn 2 does not run on " + gpu.name) +
         ")";
}

void check_attention_runs(sim::Attention a, sim::Precision p, const hardware::GpuSpec& gpu,
                          bool has_sdpa) {
  if (a != sim::Attention::kFlash2 && a != sim::Attention::kFlash3) return;
  const std::string name = sim::attention_name(a);
  if (p == sim::Precision::kFp32) {
    throw InputError("--attention", name + " runs in fp16 or bf16 only (flash-attn: \"only "
                                           "support fp16 and bf16 data type\"); fp32 training "
                                           "uses " + (has_sdpa ? "sdpa or eager" : "eager"));
  }
  const bool hopper = gpu.arch == hardware::Arch::kHopper;
  if (a == sim::Attention::kFlash3 && !hopper) {
    throw InputError("--attention", name + " (FlashAttention-3) runs on Hopper GPUs (H100, H200) "
                                           "only, not on " + gpu.name);
  }
  if (!hardware::runs_flash_attn_2(gpu.arch)) {
    throw InputError("--attention", name + " needs an Ampere or newer GPU, not " + gpu.name);
  }
}

namespace {

// A DsConfig from the ZeRO flags, with DeepSpeed 0.19's defaults (DsConfig's own) for everything
// not given. A flag the chosen stage does not read gets a line in `notes`.
sim::DsConfig config_from_flags(const SetupOptions& o, const sim::ParseContext& context,
                                std::vector<std::string>* notes) {
  sim::DsConfig c;
  c.precision = context.auto_precision;
  c.grad_accum_dtype = context.auto_precision;  // data_types.grad_accum_dtype: the model's
  sim::ZeroConfig& z = c.zero;
  if (o.stage) {
    if (std::optional<std::string> problem = sim::stage_range_problem(*o.stage)) {
      throw InputError("--stage", *problem);
    }
  }
  const int stage = o.stage.value_or(0);
  z.stage = stage;
  // The size flags are the planner's knobs, one value each: the same syntax, ranges and errors.
  // A stage-3-only one with a lower stage is refused, as the planner refuses it, rather than
  // silently unused. (Flags several stages read, like --reduce-bucket, are accepted with any
  // stage, so that one set of flags can run a whole stage matrix: scripts/validate-matrix.sh;
  // where the stage ignores one, a note says so.)
  using sim::Knob;
  const std::string stage_given = o.stage ? "--stage is " + std::to_string(stage)
                                          : std::string("no --stage was given (stage 0)");
  auto note_if_ignored = [&](Knob knob) {
    if (const char* why = sim::stage_ignores(knob, stage)) {
      notes->push_back(std::string(sim::knob_flag(knob)) + " has no effect: " + why + ", and " +
                       stage_given);
    }
  };
  struct SizeFlag {
    Knob knob;
    const std::optional<std::string>* text;
    int64_t* field;
  };
  const SizeFlag sizes[] = {
      {Knob::kReduceBucket, &o.reduce_bucket_size, &z.reduce_bucket_size},
      {Knob::kAllgatherBucket, &o.allgather_bucket_size, &z.allgather_bucket_size},
      {Knob::kPrefetchBucket, &o.prefetch_bucket_size, &z.prefetch_bucket_size},
      {Knob::kMaxLive, &o.max_live_parameters, &z.max_live_parameters},
      {Knob::kPersistenceThreshold, &o.param_persistence_threshold, &z.param_persistence_threshold},
      {Knob::kSubGroupSize, &o.sub_group_size, &z.sub_group_size}};
  for (const SizeFlag& f : sizes) {
    if (!*f.text) continue;
    *f.field = sim::parse_knob_value(f.knob, **f.text, sim::knob_flag(f.knob));
    const bool stage3_only =
        sim::stage_ignores(f.knob, 3) == nullptr && sim::stage_ignores(f.knob, 2) != nullptr;
    if (stage3_only && stage < 3) {
      throw InputError(sim::knob_flag(f.knob),
                       std::string(sim::stage_ignores(f.knob, stage)) + ", but " + stage_given);
    }
    note_if_ignored(f.knob);
  }
  // overlap_comm_valid (zero/config.py): unset means "on for stage 3 only".
  z.overlap_comm = o.overlap_comm.value_or(stage == 3);
  if (o.overlap_comm) note_if_ignored(Knob::kOverlapComm);
  z.offload_optimizer.device = parse_offload(o.offload_optimizer, "--offload-optimizer");
  z.offload_param.device = parse_offload(o.offload_param, "--offload-param");
  if (z.offload_optimizer.device == sim::OffloadDevice::kNvme) {
    z.offload_optimizer.nvme_path = o.nvme_path;
  }
  if (z.offload_param.device == sim::OffloadDevice::kNvme) z.offload_param.nvme_path = o.nvme_path;
  apply_checkpointing(parse_checkpointing(o.checkpointing).value_or(0), c.activation_checkpointing);
  if (o.autotp) {
    if (*o.autotp < 1) {
      throw InputError("--autotp", "must be a positive integer, got " + std::to_string(*o.autotp));
    }
    if (context.dp_world_size % *o.autotp != 0) {
      throw InputError("--autotp", "AutoTP size " + std::to_string(*o.autotp) +
                                       " does not divide the " +
                                       std::to_string(context.dp_world_size) + " GPUs");
    }
    if (*o.autotp > 1) c.other["tensor_parallel"] = {{"autotp_size", *o.autotp}};
  }
  // Batch keys come from the context (the flags); with none given, DeepSpeed's rule applies.
  sim::ParseContext flags = context;
  if (!flags.micro_batch && !flags.train_batch_size) flags.micro_batch = 1;
  // Errors in a config made from flags name the flags, not a file.
  sim::complete_ds_config(c, flags, "command-line ZeRO flags");
  return c;
}

// NVMe parameter offload: every swapped tensor's per-rank slice must fit one swap buffer, or
// DeepSpeed stops at zero.Init (partitioned_param_swapper.py get_buffer: "More elements ... than
// buffer size"). ZeRO flags leave buffer_size to zplan, which sizes it as plan does; a file's own
// value is kept and, when too small, refused: that run never reaches its first step.
void check_param_swap_buffers(const SetupOptions& o, const models::Model& model, int dp,
                              sim::DsConfig& config) {
  sim::OffloadParamConfig& prm = config.zero.offload_param;
  if (config.zero.stage != 3 || prm.device != sim::OffloadDevice::kNvme) return;
  if (o.ds_config.empty()) {
    prm.buffer_size = sim::param_swap_buffer_size(model, dp, config);
    return;
  }
  const int64_t slice = sim::largest_swapped_param_slice(model, dp, config);
  if (slice > prm.buffer_size) {
    throw InputError(json_location(o.ds_config, "/zero_optimization/offload_param/buffer_size"),
                     strformat("%lld elements, less than the largest tensor's slice per GPU, %lld: "
                               "DeepSpeed stops at zero.Init (\"More elements %lld than buffer "
                               "size\"); set it to at least %lld",
                               static_cast<long long>(prm.buffer_size),
                               static_cast<long long>(slice), static_cast<long long>(slice),
                               static_cast<long long>(slice)));
  }
}

// --client-optimizer: the script's torch.optim.AdamW, for a config without an optimizer block
// (engine.py _configure_optimizer steps the client optimizer on the ZeRO partitions).
void apply_client_optimizer(const SetupOptions& o, sim::DsConfig& config) {
  const std::string v = ascii_lower(o.client_optimizer);
  sim::GpuStep step;
  if (v == "fused" || v == "adamw_torch_fused") {
    step = sim::GpuStep::kFused;
  } else if (v == "foreach" || v == "adamw_torch") {
    step = sim::GpuStep::kForeach;
  } else {
    throw InputError("--client-optimizer", "must be fused, foreach, adamw_torch_fused or "
                                           "adamw_torch, got '" + o.client_optimizer + "'");
  }
  if (config.optimizer.from_file) {
    throw InputError("--client-optimizer",
                     "contradicts " + json_location(o.ds_config, "/optimizer") + ", which builds " +
                         config.optimizer.name + "; the flag is for the script's own optimizer, "
                         "with no optimizer block in the file");
  }
  if (config.zero.offload_optimizer.device != sim::OffloadDevice::kNone) {
    throw InputError("--client-optimizer",
                     "with optimizer offload the Trainer and Accelerate hand DeepSpeed a "
                     "DeepSpeedCPUAdam instead (zero_force_ds_cpu_optimizer), which steps on the "
                     "host; the flag is for the GPU update");
  }
  config.optimizer.name = "torch.optim.AdamW";
  config.optimizer.gpu_step = step;
  // torch.optim.AdamW's default weight_decay, 0.01: the foreach path's decay pass.
  config.optimizer.weight_decay_pass = step == sim::GpuStep::kForeach;
}

}  // namespace

Setup resolve_setup(const SetupOptions& o) {
  // --sub-group-size may go with --ds-config: it replaces the file's sub_group_size; --stage
  // fills a "stage": "auto" (ParseContext::stage).
  SetupOptions file_flags = o;
  file_flags.sub_group_size.reset();
  file_flags.stage.reset();
  if (!o.ds_config.empty() && any_zero_flag(file_flags)) {
    throw InputError("--ds-config",
                     "give either a ds_config file or ZeRO flags (--offload-*, bucket sizes), "
                     "not both; with a file only --stage (for a \"stage\": \"auto\") and "
                     "--sub-group-size apply");
  }
  const std::optional<int64_t> checkpointing = parse_checkpointing(o.checkpointing);
  models::Model model = resolve_model(o);
  hardware::Cluster cluster = resolve_cluster(o);
  sim::Workload workload = resolve_workload(o, model);
  sim::ParseContext context;
  context.dp_world_size = cluster.gpus;
  context.hidden_size = model.shape().hidden;
  context.micro_batch = o.micro_batch;
  context.gradient_accumulation_steps = o.gradient_accumulation;
  context.train_batch_size = o.global_batch;
  context.auto_precision = resolve_precision(o, cluster.profile.gpu);
  context.precision_from_flag = !o.precision.empty();
  if (!o.ds_config.empty()) context.stage = o.stage;
  std::vector<std::string> notes;
  context.notes = &notes;
  sim::DsConfig config = o.ds_config.empty() ? config_from_flags(o, context, &notes)
                                             : sim::load_ds_config(o.ds_config, context);
  if (checkpointing) {
    apply_checkpointing(*checkpointing, config.activation_checkpointing);
  } else if (!o.ds_config.empty() && config.activation_checkpointing.enabled) {
    // DeepSpeed never turns checkpointing on from the block (sim::read_activation_checkpointing):
    // say what the block is taken to mean and how to say otherwise.
    notes.push_back(
        json_location(o.ds_config, "/activation_checkpointing") +
        ": the block configures DeepSpeed's checkpointing, it does not turn it on (the model "
        "code does: the Trainer's --gradient_checkpointing, Megatron-DeepSpeed's "
        "--checkpoint-activations); zplan assumes the model checkpoints every layer" +
        (config.activation_checkpointing.cpu_checkpointing ? ", in host memory" : "") +
        "; --checkpointing none if it does not");
  }
  if (!o.ds_config.empty() && o.sub_group_size) {
    config.zero.sub_group_size =
        sim::parse_knob_value(sim::Knob::kSubGroupSize, *o.sub_group_size, "--sub-group-size");
    if (const char* why = sim::stage_ignores(sim::Knob::kSubGroupSize, config.zero.stage)) {
      notes.push_back(std::string("--sub-group-size has no effect: ") + why + ", and the file's " +
                      "stage is " + std::to_string(config.zero.stage));
    }
  }
  if (!o.client_optimizer.empty()) apply_client_optimizer(o, config);
  if (o.attention.empty() && !o.no_flash_attention && model.shape().attn_logit_softcapping > 0) {
    // Gemma-2: transformers from 4.42 swapped the default sdpa for eager
    // (Gemma2PreTrainedModel._check_and_enable_sdpa) until its attention refactor removed the
    // override; releases since default to sdpa, whose path drops the attention soft-capping, and
    // Gemma2ForCausalLM warns to train with eager (docs/models.md, "Gemma-2").
    notes.push_back(model.name() +
                    " soft-caps its attention scores: transformers 4.42-4.46 train it with eager "
                    "attention by default, later releases with sdpa (which skips the soft-capping; "
                    "they warn to train Gemma-2 with eager); planned with sdpa, --attention eager "
                    "for the recommended one");
  }
  if (o.transformers.empty() && model.shape().fused_experts && !model.shape().dense_experts) {
    // docs/models.md "Mixture of experts": the layout changes the kernels, the host's work and
    // the ZeRO-3 gathers of every MoE block.
    notes.push_back(model.name() + "'s experts are planned as transformers 5 builds them (" +
                    model.shape().moe_block_name +
                    ".experts: 3D tensors in one module, run by grouped_mm); with transformers "
                    "4.x (" +
                    (model.shape().gpt_oss_experts ? "the same tensors" : "a module per expert") +
                    ", a Python loop over the experts) give --transformers 4");
  }
  if (const int64_t trained = model.shape().context_length;
      trained > 0 && model.shape().max_positions == 0 && workload.seq_len > trained) {
    // Rotary positions run past the table's end (no lookup fails), but the model was not
    // trained there; the plan is for the sequence asked.
    notes.push_back("--seq-len " + std::to_string(workload.seq_len) + " is longer than " +
                    model.name() + "'s max_position_embeddings (" + std::to_string(trained) +
                    "): planned as asked; the model was not trained on such sequences unless "
                    "its rope_scaling or a long-context checkpoint extends them");
  }
  if (!model.shape().quant_method.empty()) {
    // A quantized checkpoint (gpt-oss's mxfp4, DeepSeek-V3's fp8): training loads it
    // dequantized (Mxfp4Config(dequantize=True), or a bf16 copy), which is what zplan plans.
    notes.push_back(model.name() + "'s config has a quantization_config (quant_method \"" +
                    model.shape().quant_method +
                    "\"): planned with every weight in the training precision, as a run that "
                    "loads the checkpoint dequantized trains it; a base kept quantized (QLoRA's "
                    "4-bit weights, FP8 training) is not modelled");
  }
  if (model.shape().dense_experts) {
    // Llama4TextMoe (docs/models.md, "Mixture of experts"): what makes its activations and its
    // step large is worth a line wherever it is planned.
    notes.push_back(model.name() + " runs every expert on every token, as Llama4TextMoe does "
                    "in every transformers release: each MoE block copies a token to all " +
                    std::to_string(model.shape().experts) +
                    " experts (one bmm, the unpicked copies scaled by 0), so its experts' "
                    "activations and FLOPs are " + std::to_string(model.shape().experts) +
                    " times a token's, not num_experts_per_tok times");
  }
  if (std::string note = settle_remote_attention(o, model, workload, config.precision,
                                                 cluster.profile.gpu);
      !note.empty()) {
    notes.push_back(note);
  }
  check_attention_runs(workload.attention, config.precision, cluster.profile.gpu,
                       !model.shape().qwen_names);
  sim::check_zeropp_mics_cluster(config.zero, cluster, o.ds_config.empty() ? "" : o.ds_config);
  workload.sequence_parallel = sim::sequence_parallel_size(config);
  sim::check_sequence_parallel(model, workload, cluster, o.ds_config);
  // AutoTP: the simulator runs one GPU's shard of the model, ZeRO over the GPUs / tp.
  workload.tensor_parallel = sim::autotp_size(config);
  workload.tp_overlap_comm = sim::autotp_overlap_comm(config);
  sim::check_tensor_parallel(model, config, workload, cluster,
                             o.ds_config.empty()
                                 ? std::string("--autotp")
                                 : json_location(o.ds_config, "/tensor_parallel/autotp_size"));
  std::optional<models::Model> shard;
  if (workload.tensor_parallel > 1) {
    shard = models::tensor_parallel_shard(model, workload.tensor_parallel);
  }
  check_param_swap_buffers(o, shard ? *shard : model, sim::data_parallel_ranks(cluster, workload),
                           config);
  if (std::string note = sim::zeropp_mics_note(config.zero, cluster); !note.empty()) {
    notes.push_back(note);
  }
  // Flags build the file the planner would write: an MoE block gathered whole at stage 3 (its
  // class listed where it is not a default leaf). A file of the user's is priced as it reads,
  // with a note when its experts are gathered one by one.
  if (o.ds_config.empty()) {
    if (std::string cls = sim::missing_moe_leaf_class(model, config.zero); !cls.empty()) {
      config.zero.leaf_module.classes.push_back(cls);
    }
  } else if (std::string note = sim::moe_leaf_note(model, config.zero, o.ds_config);
             !note.empty()) {
    notes.push_back(note);
  }
  if (!o.ds_config.empty()) {
    check_precision_runs(config.precision, cluster.profile.gpu,
                         json_location(o.ds_config, "/bf16"));
  }
  return Setup{std::move(model), std::move(cluster), std::move(config),
               workload,         std::move(notes),   std::move(shard)};
}

void print_notes(const std::vector<std::string>& notes) {
  for (const std::string& n : notes) std::cerr << "zplan: note: " << n << '\n';
}

}  // namespace zplan::cli
