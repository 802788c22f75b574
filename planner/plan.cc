#include "planner/plan.h"

#include "planner/comm_variants.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "base/text.h"
#include "base/input_error.h"
#include "models/finetune.h"
#include "planner/launch.h"
#include "planner/text.h"
#include "planner/what_would_fit.h"

namespace zplan::planner {

namespace {

constexpr int kGpu = static_cast<int>(sim::Tier::kGpu);
constexpr int kPinned = static_cast<int>(sim::Tier::kPinnedHost);
constexpr int kHost = static_cast<int>(sim::Tier::kHost);
constexpr int kNvme = static_cast<int>(sim::Tier::kNvme);

// A loser is called "<part>-bound" only when that part is this much of its step; below, the
// part merely grew ("more gradient reduction on its critical path").
constexpr double kBinds = 0.10;
// Parts under 1% of the step are not worth a word.
constexpr double kMentionShare = 0.01;
// Two throughputs this close are "as fast": the simulator's own error is several percent.
constexpr double kSameSpeed = 0.001;
// Alternatives shown: at most this many, diverse (one per stage/offload family).
constexpr size_t kMaxAlternatives = 5;
constexpr size_t kMaxFittingAlternatives = 3;

const char* kBoundNames[sim::kNumPathParts] = {
    "compute-bound", "communication-bound on all-gather",
    "communication-bound on gradient reduction",
    "PCIe-bound",    "CPU-Adam-bound",   "NVMe-bound",
    "host-bound (the GPU waits for the Python that issues its kernels)"};

double share(const Evaluation& e, int part) {
  return e.step_time_s > 0 ? e.critical_path_s[part] / e.step_time_s : 0;
}

// "23%", or "2.4%" below 10% where the decimal still says something.
std::string percent(double fraction) {
  return fraction < 0.1 ? strformat("%.1f%%", 100 * fraction) : strformat("%.0f%%", 100 * fraction);
}

// The other parts of the critical path worth a word: ", all-gather 3.0%, host copies 2.1%".
std::string path_list(const Evaluation& e, int skip) {
  std::string s;
  for (int p = 1; p < sim::kNumPathParts; ++p) {
    if (p == skip || share(e, p) < kMentionShare) continue;
    s += strformat(", %s %s", sim::path_part_name(static_cast<sim::PathPart>(p)),
                   percent(share(e, p)).c_str());
  }
  return s;
}

const char* device_words(int64_t level) { return level == 2 ? "NVMe" : "CPU memory"; }

std::string offload_words(const Candidate& c) {
  const int64_t o = c[Knob::kOffloadOptimizer], p = c[Knob::kOffloadParam];
  if (o != 0 && p != 0) {
    return o == p ? strformat("optimizer states and parameters to %s", device_words(o))
                  : strformat("optimizer states to %s and parameters to %s", device_words(o),
                              device_words(p));
  }
  if (o != 0) return strformat("optimizer states to %s", device_words(o));
  return strformat("parameters to %s", device_words(p));
}

// The dominant category of host memory (pinned + pageable) at its peak.
std::pair<int, double> host_dominant(const Evaluation& e) {
  sim::MemoryBreakdown b = e.at_peak[kPinned];
  b += e.at_peak[kHost];
  sim::Category d = b.dominant();
  return {static_cast<int>(d), b.total() > 0 ? b[d] / b.total() : 0};
}

bool in_list(const std::vector<size_t>& v, size_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The fastest fitting config, in rank order, that offloads at most `max_level` and passes
// `keep` (a predicate on the candidate).
template <typename Keep>
std::optional<size_t> best_fitting(const SearchResult& s, int max_level, Keep keep) {
  for (size_t i : s.order) {
    if (!s.evals[i].fits()) break;
    const Candidate& c = s.candidates[i];
    if (c.offload_level() <= max_level && keep(c)) return i;
  }
  return std::nullopt;
}
bool any_config(const Candidate&) { return true; }
bool lossless(const Candidate& c) { return !c.comm.lossy(); }
bool lossy(const Candidate& c) { return c.comm.lossy(); }

// The faster fitting configs a margin passed over for the recommended `rec`: the fastest of all,
// and the fastest lossy one that offloads no more (when `rec` is lossless).
std::vector<size_t> passed_over(const SearchResult& s, size_t rec) {
  std::vector<size_t> out;
  const double speed = s.evals[rec].tokens_per_s;
  if (!s.order.empty() && s.order[0] != rec && s.evals[s.order[0]].fits()) {
    out.push_back(s.order[0]);
  }
  const Candidate& c = s.candidates[rec];
  if (!c.comm.lossy()) {
    std::optional<size_t> q = best_fitting(s, c.offload_level(), lossy);
    if (q && *q != rec && s.evals[*q].tokens_per_s > speed && !in_list(out, *q)) {
      out.push_back(*q);
    }
  }
  return out;
}

// What a lossy variant quantizes: "int8 weights and int4 gradients".
std::string quantized_words(const CommVariant& v) {
  if (v.qwz && v.qgz) return "int8 weights and int4 gradients";
  return v.qwz ? "int8 weights" : "int4 gradients";
}

// Why a fitting config `faster` than the recommended `rec` was passed over: the offload margin
// or the lossy margin.
std::string passed_over_reason(const Candidate& faster, const Candidate& rec,
                               const PlanOptions& options) {
  if (faster.offload_level() > rec.offload_level()) {
    return strformat(
        "it offloads %s; offload is recommended only when it wins by more than "
        "%.0f%% (--offload-margin)",
        offload_words(faster).c_str(), 100 * options.offload_margin);
  }
  if (faster.comm.lossy() && !rec.comm.lossy()) {
    return strformat(
        "it communicates %s, which changes the numbers training computes with; "
        "quantized communication is recommended only when it wins by more than "
        "%.0f%% over the best lossless config (--lossy-margin)",
        quantized_words(faster.comm).c_str(), 100 * options.lossy_margin);
  }
  return "";
}

std::vector<std::string> needs_lines(const Problem& problem, const Candidate& c,
                                     const Evaluation& e, const sim::DsConfig& config,
                                     const PlanOptions& options) {
  const hardware::Cluster& cl = problem.cluster;
  std::vector<std::string> out =
      launch_lines(problem, config, options.ds_config_file, options.ds_config_format);
  out.push_back(strformat(
      "train on sequences of %lld tokens: the prediction and the batch keys "
      "(train_batch_size %lld = micro-batch %lld x gas %lld x %d GPUs) assume it",
      static_cast<long long>(problem.workload.seq_len),
      // AutoTP: the file's count over every GPU (sim::ds_config_to_json).
      static_cast<long long>(config.train_batch_size * sim::autotp_size(config)),
      static_cast<long long>(config.micro_batch),
      static_cast<long long>(config.gradient_accumulation_steps), cl.gpus));
  if (c[Knob::kCheckpointing]) {
    out.push_back(std::string(
                      "activation checkpointing: turn it on in the model -- Hugging Face: "
                      "--gradient_checkpointing or model.gradient_checkpointing_enable(); ") +
                  (megatron_builds(problem.model) ? "Megatron-DeepSpeed: --checkpoint-activations; "
                                                  : "") +
                  "else wrap each block in deepspeed.checkpointing.checkpoint -- the "
                  "activation_checkpointing block only configures DeepSpeed's implementation");
  }
  if (c[Knob::kCheckpointing] == 2) {
    // checkpointing.py CheckpointFunction: CPU_CHECKPOINT moves the inputs it saves to the host;
    // torch.utils.checkpoint (Hugging Face's gradient_checkpointing) never reads the block.
    out.push_back(
        "cpu_checkpointing: the prediction keeps the checkpoints in host memory, which only "
        "DeepSpeed's own checkpoint function does (deepspeed.checkpointing.checkpoint, as "
        "Megatron-DeepSpeed's --checkpoint-activations uses it); Hugging Face's "
        "gradient_checkpointing (torch.utils.checkpoint) ignores it and keeps them on the GPU");
  }
  if (const models::ModelShape& m = problem.model.shape(); m.moe()) {
    // docs/models.md "Mixture of experts": the layout decides the kernels, the host's work, the
    // ZeRO-3 gathers and what LoRA can adapt.
    out.push_back(
        m.dense_experts
            ? std::string("experts: the prediction runs every expert on every token, as "
                          "Llama4TextMoe does in every transformers release (one bmm over the "
                          "experts, the unpicked copies scaled by 0): the routed experts cost E "
                          "times a token's FLOPs, not experts_per_token times")
        : m.fused_experts && !m.expert_loop
            ? std::string("transformers: the prediction assumes transformers 5's experts (3D "
                          "tensors in one module per block, run by grouped_mm, its default "
                          "experts_implementation); with transformers 4.x re-plan with "
                          "--transformers 4")
            : std::string("transformers: the prediction assumes transformers 4.x's experts (") +
                  (m.fused_experts ? "3D tensors" : "a module of Linears per expert") +
                  ", run in a Python loop over the experts reached); with transformers 5 "
                  "re-plan without --transformers 4");
  }
  if (problem.model.shape().attention_sinks) {
    // GPT-OSS: no sdpa path for the sinks; eager is what from_pretrained falls back to
    // (cli/common_options.cc resolve_workload, docs/models.md "GPT-OSS").
    out.push_back(
        problem.workload.fused_attention()
            ? std::string("attention: the prediction assumes attn_implementation=\"kernels-"
                          "community/vllm-flash-attn3\", the one flash kernel transformers "
                          "runs GPT-OSS's attention sinks with (the kernels package, Hopper); "
                          "without it the model trains with eager attention: re-plan with "
                          "--attention eager")
            : std::string("attention: the prediction assumes eager attention, what "
                          "from_pretrained gives GPT-OSS (no sdpa path for its attention "
                          "sinks), which keeps [b, heads, s, s] tensors per layer; on Hopper "
                          "attn_implementation=\"kernels-community/vllm-flash-attn3\" would "
                          "not (re-plan with --attention flash_attention_3)"));
  } else if (problem.model.shape().qwen_names) {
    // Qwen v1's modeling_qwen.py reads no attn_implementation (cli/common_options.cc
    // resolve_workload, docs/models.md "Qwen v1").
    out.push_back("model code: Qwen v1's modeling_qwen.py ships with the checkpoint: load it with "
                  "trust_remote_code=True (AutoModelForCausalLM.from_pretrained); the prediction "
                  "is for its QWenBlock modules and their names (c_attn, c_proj, w1, w2)");
    out.push_back(
        problem.workload.fused_attention()
            ? std::string("attention: the prediction assumes the flash_attn package (flash-attn "
                          "2) is installed: Qwen v1's remote code uses it when it imports "
                          "(use_flash_attn \"auto\") and reads no attn_implementation; without "
                          "it the model trains with its own eager attention: re-plan with "
                          "--attention eager")
            : std::string("attention: the prediction assumes Qwen v1's own eager attention "
                          "(its remote code has no sdpa path), which keeps [b, heads, s, s] "
                          "tensors per layer") +
                  (flash_attn_2_could_run(problem)
                       ? "; flash-attn 2, which it uses when installed on a 16-bit model, would "
                         "not (--attention flash_attention_2)"
                       : ""));
  } else if (problem.workload.fused_attention()) {
    out.push_back(std::string("attention: the prediction assumes attn_implementation=\"") +
                  sim::attention_name(problem.workload.attention) +
                  "\" (Hugging Face's default is sdpa); with eager attention, re-plan with "
                  "--attention eager");
  } else {
    out.push_back(
        "attention: the prediction assumes eager attention, which keeps [b, heads, s, s] "
        "tensors per layer; attn_implementation=\"sdpa\" or flash_attention_2 would not");
  }
  if (problem.workload.fused_loss) {
    out.push_back(
        "loss: the prediction assumes a fused linear + cross-entropy kernel (Liger's "
        "use_liger_kernel=True / LigerFusedLinearCrossEntropyLoss); Hugging Face's own loss "
        "materializes the logits and their fp32 copy");
    if (problem.workload.fused_swiglu) {
      out.push_back(
          "mlp and norms: the prediction assumes Liger-Kernel's SwiGLU, RMSNorm and rotary "
          "kernels (--loss liger; apply_liger_kernel_to_* patches all of them), one kernel each "
          "where Hugging Face's code runs chains of eager ones; its SwiGLU keeps gate and up "
          "only");
    }
  } else if (!problem.workload.loss_upcast) {
    out.push_back(
        "loss: the prediction assumes the loss on the 16-bit logits (--loss no-upcast); "
        "Hugging Face's ForCausalLMLoss upcasts them to fp32 first, twice the bytes");
  }
  if (c.comm.lossy()) {
    // What each quantizes (partition_parameters.py _all_gather_coalesced(quantize=True) and
    // CUDAQuantizer: int8, symmetric, groups of < 8000 elements; coalesced_collectives.py
    // all_to_all_quant_reduce: int4 on both hops), and what its authors claim for it.
    std::string what;
    if (c.comm.qwz) {
      what +=
          "qwZ all-gathers block-quantized int8 weights, so forward and backward compute with "
          "their dequantized copies";
    }
    if (c.comm.qgz) {
      what += std::string(what.empty() ? "" : "; ") +
              "qgZ averages gradients through int4 all-to-alls, so the optimizer steps on "
              "gradients with int4 rounding error";
    }
    out.push_back(
        "quantized communication changes numerics: " + what +
        ". The ZeRO++ paper (arXiv 2306.10209) says qgZ \"preserves accuracy despite "
        "communicating low precision data\" and DeepSpeed's ZeRO++ blog claims 4x less "
        "communication \"without impacting model quality\", from their own pretraining runs; "
        "check yours against a short lossless run (the same file without "
        "zero_quantized_weights/zero_quantized_gradients). DeepSpeed's quantizer op must build: "
        "install with DS_BUILD_QUANTIZER=1 or let it compile at start-up (a CUDA toolkit "
        "matching torch); ds_report lists it as quantizer");
  }
  if (c.stage() == 3 && problem.model.shape().moe()) {
    // models.md "Mixture of experts"; DeepSpeed 0.19 deepspeed/utils/z3_leaf_module.py and
    // zero/leaf_module_config.py DEFAULT_LEAF_MODULE_CLASSES, applied by engine.py
    // _configure_distributed_model before the ZeRO-3 hooks are installed.
    const std::string cls = problem.model.shape().moe_block_class_name();
    // Not a leaf under DeepSpeed's defaults: the written file lists it (to_ds_config).
    sim::ZeroConfig defaults;
    defaults.stage = 3;
    const bool listed = !sim::missing_moe_leaf_class(problem.model, defaults).empty();
    out.push_back(
        "mixture of experts at ZeRO-3: the prediction gathers each MoE block (router and every "
        "expert) at once, as a ZeRO-3 leaf module. DeepSpeed >= 0.18 makes Hugging Face's "
        "MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock and Qwen3MoeSparseMoeBlock leaves by "
        "itself (zero_optimization.leaf_module's default classes)" +
        std::string(listed ? "; the written file lists " + cls + " in "
                                 "zero_optimization.leaf_module.classes"
                           : "") +
        ". DeepSpeed before 0.18 has no leaf_module: there call "
        "deepspeed.utils.set_z3_leaf_modules(model, [" + cls + "]) before deepspeed.initialize" +
        (listed ? " and drop the key" : "") +
        (problem.model.shape().fused_experts
             ? std::string(". Without a leaf ZeRO-3 gathers the block module by module (the "
                           "router, the experts' 3D tensors as one module") +
                   (problem.model.shape().shared_expert_ffn > 0 ? ", the shared expert" : "") +
                   "): slower, not unsafe"
             : std::string(". Without a leaf ZeRO-3 gathers expert by expert as the router "
                           "reaches them (transformers 4.x builds a module per expert): ranks "
                           "whose tokens reach different experts issue different all-gathers "
                           "and training hangs")));
  }
  const models::FineTune& ft = problem.model.finetune();
  if (ft.frozen()) {
    out.push_back(strformat(
        "fine-tuning: the prediction assumes %s: %lld of %lld parameters trainable; LoRA and "
        "frozen parameters are set in the training script, not in the ds_config",
        models::describe_finetune(ft).c_str(),
        static_cast<long long>(problem.model.trainable_params()),
        static_cast<long long>(problem.model.num_params())));
  }
  if (c.offload_level() > 0) {
    out.push_back(strformat(
        "host memory: %s per node of %s at the peak (%s pinned)", gib(e.host_peak_bytes).c_str(),
        gib(cl.profile.node.host_memory_bytes).c_str(), gib(e.peak_bytes[kPinned]).c_str()));
  }
  if (c.offload_level() == 2) {
    out.push_back(
        strformat("NVMe: nvme_path is \"%s\" -- point it at a local NVMe mount with at "
                  "least %s free per node (--nvme-path); DeepSpeed's async_io op needs "
                  "libaio (ds_report shows async_io [OKAY])",
                  problem.nvme_path.c_str(), gib(e.peak_bytes[kNvme]).c_str()));
  }
  return out;
}

}  // namespace

sim::DsConfig config_of(const Problem& problem, const SearchResult& search, size_t index) {
  return to_ds_config(search.candidates[index], base_config(problem, search.space.batch), problem);
}

SearchResult run_search(const Problem& problem, const KnobRequest& knobs, const BatchRequest& batch,
                        const EvalOptions& options) {
  SearchResult s;
  s.space = resolve_search_space(problem, knobs, batch);
  s.candidates = enumerate_candidates(problem, s.space);
  if (s.candidates.empty()) {
    throw InputError("--stage", "the lists leave no valid configuration to evaluate");
  }
  s.evals = evaluate_all(problem, s.space, s.candidates, options, &s.stats);
  // ZeRO++ and MiCS variants of the best stage-3 configs, on multi-node clusters.
  s.order = rank_order(s.evals);
  add_comm_variants(problem, options, &s);
  s.order = rank_order(s.evals);
  s.pareto = pareto_front(s.evals);
  return s;
}

std::string what_binds(const Evaluation& e) {
  if (!e.simulated || e.step_time_s <= 0) return "not simulated";
  const double compute = share(e, 0);
  if (sim::is_compute_bound(compute)) {
    return strformat("compute-bound: compute %.0f%% of the step's critical path (MFU %.0f%%)",
                     100 * compute, 100 * e.mfu) +
           path_list(e, 0);
  }
  int worst = 1;
  for (int p = 2; p < sim::kNumPathParts; ++p) {
    if (e.critical_path_s[p] > e.critical_path_s[worst]) worst = p;
  }
  if (worst == 1 || worst == 2) {
    // "communication-bound: all-gather, bandwidth-dominated (62% of the step, latency 9%)".
    return sim::bound_phrase(e.critical_path_s, e.critical_latency_s, e.step_time_s) +
           strformat(", compute %.0f%%", 100 * compute) + path_list(e, worst);
  }
  return strformat("%s: %s %.0f%% of the step's critical path, compute %.0f%%", kBoundNames[worst],
                   sim::path_part_name(static_cast<sim::PathPart>(worst)), 100 * share(e, worst),
                   100 * compute) +
         path_list(e, worst);
}

std::string shortfall(const Problem& problem, const Evaluation& e) {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : "; ") + part; };
  if (!e.fit.gpu_fits()) {
    const sim::MemoryBreakdown& b = e.at_peak[kGpu];
    sim::Category d = b.dominant();
    add(strformat("OOM by %s on GPU at %s (peak %s of %s usable; %s %.0f%%)",
                  shortfall_size(e.fit.over.gpu).c_str(), sim::phase_name(e.gpu_peak_phase),
                  gib(e.peak_bytes[kGpu]).c_str(),
                  gib(problem.cluster.profile.gpu.memory_bytes * (1 - problem.headroom)).c_str(),
                  category_words(static_cast<int>(d), problem.precision).c_str(), 100 * b[d] / b.total()));
  }
  if (!e.fit.host_fits()) {
    auto [d, frac] = host_dominant(e);
    add(strformat(
        "host memory short by %s per node (peak %s of %s usable; %s %.0f%%)",
        shortfall_size(e.fit.over.host).c_str(), gib(e.host_peak_bytes).c_str(),
        gib(problem.cluster.profile.node.host_memory_bytes * (1 - problem.headroom)).c_str(),
        category_words(d, problem.precision).c_str(), 100 * frac));
  }
  if (!e.fit.nvme_fits()) {
    add(strformat(
        "NVMe short by %s per node (peak %s of %s usable)", shortfall_size(e.fit.over.nvme).c_str(),
        gib(e.peak_bytes[kNvme]).c_str(),
        gib(problem.cluster.profile.node.nvme_capacity_bytes * (1 - problem.headroom)).c_str()));
  }
  return s.empty() ? "fits" : s;
}

std::string why_it_wins(const Problem& problem, const SearchResult& s, size_t w,
                        const PlanOptions& options) {
  const Evaluation& e = s.evals[w];
  const Candidate& c = s.candidates[w];
  std::string line = what_binds(e);
  // Against the best fitting config of another stage/offload family that offloads no more and
  // is not faster (a faster one lost on a margin, and the margin's words below say so).
  const std::vector<size_t> passed = passed_over(s, w);
  std::optional<size_t> other;
  bool other_family_exists = false;
  for (size_t i : s.order) {
    const Candidate& ci = s.candidates[i];
    if (ci.family() == c.family() || ci.offload_level() > c.offload_level()) continue;
    if (s.evals[i].fits() && s.evals[i].tokens_per_s > e.tokens_per_s) continue;
    other_family_exists = true;
    if (s.evals[i].fits()) {
      other = i;
      break;
    }
  }
  if (other) {
    double gain = e.tokens_per_s / s.evals[*other].tokens_per_s - 1;
    line += gain >= kSameSpeed ? strformat("; %.1f%% faster than the best other family (%s)",
                                           100 * gain, family_name(s.candidates[*other]).c_str())
                               : strformat("; as fast as the best other family (%s)%s",
                                           family_name(s.candidates[*other]).c_str(),
                                           e.peak_bytes[kGpu] < s.evals[*other].peak_bytes[kGpu]
                                               ? ", with less GPU memory"
                                               : "");
  } else if (other_family_exists) {
    line +=
        c.offload_level() == 0 ? "; no other stage fits" : "; no family that offloads less fits";
  }
  // Faster configs that lost on the offload or the lossy margin.
  for (size_t i : passed) {
    const Candidate& faster = s.candidates[i];
    if (passed_over_reason(faster, c, options).empty()) continue;
    line += strformat("; %s would be %.1f%% faster, but %s", family_name(faster).c_str(),
                      100 * (s.evals[i].tokens_per_s / e.tokens_per_s - 1),
                      passed_over_reason(faster, c, options).c_str());
  }
  if (std::string comm = comm_variant_reason(problem, s, w); !comm.empty()) line += "; " + comm;
  // A lossy winner passed the lossy margin: say by how much.
  if (c.comm.lossy()) {
    if (std::optional<size_t> exact = best_fitting(s, c.offload_level(), lossless)) {
      line += strformat(
          "; %.1f%% faster than the best lossless config (%s), more than the %.0f%% "
          "quantized communication must win by (--lossy-margin)",
          100 * (e.tokens_per_s / s.evals[*exact].tokens_per_s - 1),
          family_name(s.candidates[*exact]).c_str(), 100 * options.lossy_margin);
    }
  }
  const double cap = problem.cluster.profile.gpu.memory_bytes;
  line += strformat("; GPU peak %s of %s (%s free)", gib(e.peak_bytes[kGpu]).c_str(),
                    gib(cap).c_str(), gib(cap - e.peak_bytes[kGpu]).c_str());
  return line;
}

std::string why_it_loses(const Problem& problem, const SearchResult& s, size_t w, size_t l,
                         const PlanOptions& options) {
  const Evaluation& ew = s.evals[w];
  const Evaluation& el = s.evals[l];
  const Candidate& cw = s.candidates[w];
  const Candidate& cl = s.candidates[l];
  if (!el.fits()) {
    std::string why = shortfall(problem, el);
    if (cw[Knob::kCheckpointing] && !cl[Knob::kCheckpointing] && cw.family() == cl.family()) {
      why = "without checkpointing: " + why;
    }
    if (el.verdict == Verdict::kOverSim) why += " in the simulated schedule";
    return why;
  }
  const double ratio = el.tokens_per_s / ew.tokens_per_s;
  if (ratio > 1 + kSameSpeed) {
    const std::string reason = passed_over_reason(cl, cw, options);
    return strformat("%.1f%% faster", 100 * (ratio - 1)) +
           (reason.empty() ? "" : " in simulation, but " + reason);
  }
  if (ratio >= 1 - kSameSpeed) {
    if (el.peak_bytes[kGpu] > ew.peak_bytes[kGpu]) {
      return strformat("as fast, but uses %s more GPU memory",
                       gib(el.peak_bytes[kGpu] - ew.peak_bytes[kGpu]).c_str());
    }
    return "as fast (within 0.1%)";
  }
  // Slower: name the critical-path part that grew the most.
  int worst = 0;
  double worst_delta = -1e300;
  for (int p = 0; p < sim::kNumPathParts; ++p) {
    double d = el.critical_path_s[p] - ew.critical_path_s[p];
    if (d > worst_delta) {
      worst_delta = d;
      worst = p;
    }
  }
  std::string why = strformat("slower by %.1f%%: ", 100 * (1 - ratio));
  if (worst == 0) {
    double grew = ew.critical_path_s[0] > 0 ? worst_delta / ew.critical_path_s[0] : 0;
    if (cl[Knob::kCheckpointing] && !cw[Knob::kCheckpointing]) {
      why += "recomputes activations under checkpointing (compute +" + percent(grew) + ")";
    } else if (cl[Knob::kMicroBatch] < cw[Knob::kMicroBatch]) {
      why += strformat("micro-batch %lld runs smaller, less efficient kernels (compute +%s)",
                       static_cast<long long>(cl[Knob::kMicroBatch]), percent(grew).c_str());
    } else {
      why += "more compute time (+" + percent(grew) +
             "; kernels slowed by the collectives they overlap)";
    }
  } else if (share(el, worst) >= kBinds) {
    why += strformat("%s (%s %s of its step's critical path)", kBoundNames[worst],
                     sim::path_part_name(static_cast<sim::PathPart>(worst)),
                     percent(share(el, worst)).c_str());
  } else {
    why += strformat("more %s on its critical path (%s of its step)",
                     sim::path_part_name(static_cast<sim::PathPart>(worst)),
                     percent(share(el, worst)).c_str());
  }
  // Communication on the compute stream is the knob's doing, not the network's.
  if ((worst == 1 || worst == 2) && cl[Knob::kOverlapComm] == 0 && cl.stage() > 0) {
    why += ", overlap_comm off";
  }
  return why;
}

size_t recommend(const SearchResult& s, const PlanOptions& options) {
  // The smallest offload level whose best is within the offload margin of the best.
  const size_t best = s.order[0];
  const int best_level = s.candidates[best].offload_level();
  size_t rec = best;
  for (int level = 0; level < best_level; ++level) {
    const std::optional<size_t> at = best_fitting(s, level, any_config);
    if (at &&
        s.evals[best].tokens_per_s <= s.evals[*at].tokens_per_s * (1 + options.offload_margin)) {
      rec = *at;
      break;
    }
  }
  // Quantized communication is a fallback too: a lossy variant only when it beats the best
  // lossless config that offloads no more by more than the lossy margin.
  if (s.candidates[rec].comm.lossy()) {
    const std::optional<size_t> exact =
        best_fitting(s, s.candidates[rec].offload_level(), lossless);
    if (exact &&
        s.evals[rec].tokens_per_s <= s.evals[*exact].tokens_per_s * (1 + options.lossy_margin)) {
      rec = *exact;
    }
  }
  return rec;
}

PlanResult plan(const Problem& problem, const KnobRequest& knobs, const BatchRequest& batch,
                const PlanOptions& options) {
  PlanResult r;
  r.search = run_search(problem, knobs, batch, options.eval);
  const SearchResult& s = r.search;
  if (s.order.empty()) return r;
  if (!s.evals[s.order[0]].fits()) {
    r.closest = s.order[0];
    r.what_would_fit = what_would_fit(problem, s, s.order[0]);
    return r;
  }
  const size_t rec = recommend(s, options);
  r.recommended = rec;
  r.why = why_it_wins(problem, s, rec, options);
  const Candidate& crec = s.candidates[rec];

  // Alternatives: the faster config a margin passed over; for a lossy winner, the best lossless
  // config its explanation measures it against (it may share the winner's family); the same
  // family without checkpointing when the winner checkpoints, then the best of each other family
  // -- those that fit first, then the nearest misses among families that offload no more.
  std::vector<size_t> alts;
  auto add = [&](size_t i) {
    if (i != rec && !in_list(alts, i) && alts.size() < kMaxAlternatives) alts.push_back(i);
  };
  for (size_t i : passed_over(s, rec)) add(i);
  if (crec.comm.lossy()) {
    if (std::optional<size_t> exact = best_fitting(s, crec.offload_level(), lossless)) add(*exact);
  }
  if (crec[Knob::kCheckpointing]) {
    for (size_t i : s.order) {
      const Candidate& c = s.candidates[i];
      if (c.family() == crec.family() && !c[Knob::kCheckpointing]) {
        add(i);
        break;
      }
    }
  }
  std::map<int, size_t> family_best;  // first in rank order = fastest, or nearest miss
  std::vector<int> family_order;
  for (size_t i : s.order) {
    int f = s.candidates[i].family();
    if (f == crec.family() || family_best.count(f)) continue;
    family_best[f] = i;
    family_order.push_back(f);
  }
  std::vector<size_t> fitting, simpler_misses, other_misses;
  for (int f : family_order) {
    size_t i = family_best[f];
    if (s.evals[i].fits()) {
      fitting.push_back(i);
    } else if (s.candidates[i].offload_level() <= crec.offload_level()) {
      simpler_misses.push_back(i);
    } else {
      other_misses.push_back(i);
    }
  }
  // Among those that fit, the fastest family of each other stage first ("why not ZeRO-2?" is
  // what a user asks at scale, where stage 2's gradient all-reduce is what loses), then the
  // winner's own stage's other families (offload variants, often "as fast"), each in rank order.
  {
    std::set<int> stages_seen = {crec.stage()};
    std::vector<size_t> first_of_stage, rest;
    for (size_t i : fitting) {
      (stages_seen.insert(s.candidates[i].stage()).second ? first_of_stage : rest).push_back(i);
    }
    fitting = first_of_stage;
    fitting.insert(fitting.end(), rest.begin(), rest.end());
  }
  for (size_t k = 0; k < fitting.size() && k < kMaxFittingAlternatives; ++k) add(fitting[k]);
  // Misses, highest stage first among the least offloading: "why not simply ZeRO-3?"
  std::stable_sort(simpler_misses.begin(), simpler_misses.end(), [&](size_t a, size_t b) {
    return s.candidates[a].stage() > s.candidates[b].stage();
  });
  for (size_t k = 0; k < simpler_misses.size() && k < 2; ++k) add(simpler_misses[k]);
  for (size_t i : fitting) add(i);
  for (size_t i : other_misses) add(i);
  for (size_t i : alts) r.alternatives.push_back({i, why_it_loses(problem, s, rec, i, options)});

  sim::DsConfig config = config_of(problem, s, rec);
  // The recommendation must read back as the same batch split (validate round-trips it through
  // parse_ds_config); the file written from it (runnable_config) is checked again by its writer.
  sim::validate_ds_config(config, problem.cluster.gpus, "recommended ds_config");
  r.needs = needs_lines(problem, crec, s.evals[rec], config, options);
  r.recommended_config = std::move(config);
  // Offload chosen because nothing without it fits: say what it would take without.
  if (crec.offload_level() > 0) {
    bool plain_fits = false;
    for (size_t i : s.order) {
      if (!s.evals[i].fits()) break;
      plain_fits = plain_fits || s.candidates[i].offload_level() == 0;
    }
    if (!plain_fits) {
      std::optional<GpuCount> g = min_gpus_to_fit(problem, s.space, 0);
      r.notes.push_back(
          strformat("only offloading configs fit: without offload nothing fits on %d GPU%s",
                    problem.cluster.gpus, problem.cluster.gpus == 1 ? "" : "s") +
          (g ? "; it would take " + gpu_count_words(problem, *g, s.space.batch.global_batch)
             : std::string()));
    }
  }
  return r;
}

}  // namespace zplan::planner
