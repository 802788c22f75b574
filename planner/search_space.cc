#include "planner/search_space.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "base/text.h"
#include "base/input_error.h"
#include "sim/swap_buffers.h"
#include "sim/tensor_parallel.h"

namespace zplan::planner {

bool flash_attn_2_could_run(const Problem& p) {
  return !p.model.shape().flash_attn_off && p.precision != sim::Precision::kFp32 &&
         hardware::runs_flash_attn_2(p.cluster.profile.gpu.arch);
}

namespace {

using sim::OffloadDevice;

constexpr int64_t kNone = 0, kCpu = 1, kNvme = 2;

bool contains(const KnobValues& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string join_values(Knob k, const KnobValues& v) { return format_knob_values(k, v); }

// validate_ds_config's rules for the (stage, offload_optimizer, offload_param) triple; nullptr
// when the triple is valid.
const char* triple_rule(int64_t stage, int64_t opt, int64_t param) {
  if (param != kNone && stage != 3) return "parameter offload is valid only with ZeRO stage 3";
  if (opt == kNvme && stage != 3) return "NVMe optimizer offload needs ZeRO stage 3";
  if (opt != kNone && stage == 0) return "optimizer offload needs ZeRO stage 1, 2 or 3";
  return nullptr;
}

// Throws when a given value of stage / offload_optimizer / offload_param has no valid partner in
// the other two lists.
void check_triples(const SearchSpace& s) {
  const Knob triple[3] = {Knob::kOffloadParam, Knob::kOffloadOptimizer, Knob::kStage};
  for (Knob k : triple) {
    if (!s.given[index(k)]) continue;
    for (int64_t v : s.values[index(k)]) {
      const char* rule = nullptr;
      bool ok = false;
      for (int64_t st : s.values[index(Knob::kStage)]) {
        if (k == Knob::kStage && st != v) continue;
        for (int64_t o : s.values[index(Knob::kOffloadOptimizer)]) {
          if (k == Knob::kOffloadOptimizer && o != v) continue;
          for (int64_t p : s.values[index(Knob::kOffloadParam)]) {
            if (k == Knob::kOffloadParam && p != v) continue;
            const char* r = triple_rule(st, o, p);
            if (r == nullptr) ok = true;
            if (rule == nullptr) rule = r;
          }
        }
      }
      if (ok) continue;
      // Name the other given lists that leave no partner.
      std::string others;
      for (Knob o : triple) {
        if (o == k || !s.given[index(o)]) continue;
        if (!others.empty()) others += " and ";
        others += s.source[index(o)] + " " + join_values(o, s.values[index(o)]);
      }
      throw InputError(s.source[index(k)], format_knob_value(k, v) + " cannot be combined with " +
                                               others + ": " + rule);
    }
  }
}

// Throws when a stage-specific knob is given but no given stage reads it.
void check_stage_knobs(const SearchSpace& s) {
  if (!s.given[index(Knob::kStage)]) return;
  const KnobValues& stages = s.values[index(Knob::kStage)];
  for (int i = 0; i < kNumKnobs; ++i) {
    const Knob k = static_cast<Knob>(i);
    if (!s.given[i]) continue;
    const char* why = nullptr;
    for (int64_t stage : stages) {
      why = stage_ignores(k, stage);
      if (why == nullptr) break;
    }
    if (why != nullptr) {
      throw InputError(s.source[i], std::string(why) + ", but " + s.source[index(Knob::kStage)] +
                                        " is " + join_values(Knob::kStage, stages));
    }
  }
}

BatchPlan resolve_batch(const Problem& p, const KnobRequest& knobs, const BatchRequest& b) {
  // The data-parallel ranks: the GPUs, or the GPUs / AutoTP size (each tensor-parallel group
  // trains the same samples).
  const int64_t dp = sim::data_parallel_ranks(p.cluster, p.workload);
  const int64_t seq = p.workload.seq_len;
  if (dp < 1) throw InputError("--gpus", "must be at least 1");
  if (seq < 1) throw InputError("--seq-len", "must be at least 1");
  if (b.global_batch && b.global_batch_tokens) {
    throw InputError("--global-batch-tokens",
                     "give either --global-batch (samples) or --global-batch-tokens, not both");
  }
  if (b.gradient_accumulation && *b.gradient_accumulation < 1) {
    throw InputError("--gas",
                     "must be at least 1, got " + std::to_string(*b.gradient_accumulation));
  }
  BatchPlan plan;
  const char* flag = "--global-batch";  // what to name if the batch per GPU is too large
  if (b.global_batch) {
    const int64_t g = *b.global_batch;
    if (g < 1) throw InputError("--global-batch", "must be at least 1, got " + std::to_string(g));
    if (g % dp != 0) {
      throw InputError("--global-batch",
                       std::to_string(g) + " is not a multiple of the " + std::to_string(dp) +
                           (dp == p.cluster.gpus
                                ? std::string(" GPUs (train_batch_size = micro-batch x gas x GPUs)")
                                : std::string(" data-parallel ranks (" +
                                              std::to_string(p.cluster.gpus) + " GPUs / AutoTP " +
                                              std::to_string(p.workload.tensor_parallel) + ")")));
    }
    plan.global_batch = g;
    plan.origin = "--global-batch";
  } else if (b.global_batch_tokens) {
    flag = "--global-batch-tokens";
    const int64_t t = *b.global_batch_tokens;
    if (t < 1) {
      throw InputError("--global-batch-tokens", "must be at least 1, got " + std::to_string(t));
    }
    // Rounded to the nearest whole number of samples per GPU, at least one.
    int64_t per =
        std::max<int64_t>(1, std::llround(static_cast<double>(t) / static_cast<double>(seq * dp)));
    plan.global_batch = per * dp;
    plan.origin =
        "--global-batch-tokens " + std::to_string(t) +
        (2 * t < seq * dp ? " raised: less than one " + std::to_string(seq) +
                                "-token sample on each of the " + std::to_string(dp) + " GPUs"
                          : std::string(" (rounded to whole samples per GPU)"));
  } else if (b.gradient_accumulation && knobs.given(Knob::kMicroBatch) &&
             knobs.values(Knob::kMicroBatch).size() == 1) {
    plan.global_batch = knobs.values(Knob::kMicroBatch)[0] * *b.gradient_accumulation * dp;
    plan.origin = "--micro-batch x --gas x GPUs";
    flag = "--gas";
  } else {
    // kDefaultGlobalBatchTokens, per GPU, rounded to a power of two (in log space).
    double per = kDefaultGlobalBatchTokens / static_cast<double>(seq * dp);
    int64_t per_pow2 = per <= 1 ? 1 : int64_t{1} << std::llround(std::log2(per));
    plan.origin = per < 1 ? "default (about 2M tokens, raised to one sample per GPU)"
                          : "default (about 2M tokens)";
    // Models of a few tokens per sample (tiny-mlp: one) would need more samples per GPU than
    // zplan plans for: the largest power of two it does instead.
    int64_t cap = 1;
    while (2 * cap <= sim::kMaxBatchCount) cap *= 2;
    if (per_pow2 > cap) {
      per_pow2 = cap;
      plan.origin =
          "default (about 2M tokens, at most " + std::to_string(cap) + " samples per GPU)";
    }
    plan.global_batch = per_pow2 * dp;
  }
  plan.per_gpu = plan.global_batch / dp;
  if (plan.per_gpu > sim::kMaxBatchCount) {
    throw InputError(flag, std::to_string(plan.per_gpu) + " samples per GPU is more than the " +
                               std::to_string(sim::kMaxBatchCount) + " zplan plans for");
  }
  return plan;
}

KnobValues micro_batches(const Problem& p, const KnobRequest& knobs, const BatchRequest& b,
                         const BatchPlan& plan, std::vector<std::string>* notes) {
  const int64_t per = plan.per_gpu;
  const std::string batch_words = std::to_string(per) + " samples per GPU (global batch " +
                                  std::to_string(plan.global_batch) + " on " +
                                  std::to_string(sim::data_parallel_ranks(p.cluster, p.workload)) +
                                  (p.workload.tensor_parallel > 1 ? " data-parallel ranks)"
                                                                  : " GPUs)");
  if (b.gradient_accumulation) {
    const int64_t gas = *b.gradient_accumulation;
    if (per % gas != 0) {
      throw InputError("--gas", std::to_string(gas) + " does not divide the " + batch_words);
    }
    const int64_t mb = per / gas;
    if (knobs.given(Knob::kMicroBatch) && knobs.values(Knob::kMicroBatch) != KnobValues{mb}) {
      throw InputError("--micro-batch",
                       format_knob_values(Knob::kMicroBatch, knobs.values(Knob::kMicroBatch)) +
                           " contradicts --gas " + std::to_string(gas) +
                           ", which gives micro-batch " + std::to_string(mb) + " for the " +
                           batch_words);
    }
    return {mb};
  }
  if (knobs.given(Knob::kMicroBatch)) {
    KnobValues kept, skipped;
    for (int64_t mb : knobs.values(Knob::kMicroBatch))
      (per % mb == 0 ? kept : skipped).push_back(mb);
    if (kept.empty()) {
      throw InputError("--micro-batch", "none of " +
                                            format_knob_values(Knob::kMicroBatch, skipped) +
                                            " divides the " + batch_words);
    }
    if (!skipped.empty()) {
      notes->push_back("skipped micro-batch " + format_knob_values(Knob::kMicroBatch, skipped) +
                       ": not a divisor of the " + batch_words);
    }
    return kept;
  }
  KnobValues out;
  for (int64_t d = 1; d <= per; ++d) {
    if (per % d != 0) continue;
    if (d > 1 && d * p.workload.seq_len > kMaxDefaultMicroBatchTokens) break;
    out.push_back(d);
  }
  return out;
}

// The default list of each knob (docs/planner.md "Defaults"): DeepSpeed's default first (so ties
// resolve to it), then the value Hugging Face's "auto" derives from the hidden size.
KnobValues default_list(Knob k, int64_t hidden) {
  const int64_t h2 = hidden * hidden;
  switch (k) {
    case Knob::kStage:
      return {0, 1, 2, 3};
    case Knob::kOffloadOptimizer:
    case Knob::kOffloadParam:
      return {kNone, kCpu, kNvme};
    case Knob::kMicroBatch:
      return {};  // micro_batches() fills it
    case Knob::kCheckpointing:
      return {0, 1};
    case Knob::kOverlapComm:
      // Stage 3 uses only `true` unless the user asks (see stage_lists).
      return {1, 0};
    case Knob::kReduceBucket:
      return {kDeepSpeedBucket, h2};
    case Knob::kAllgatherBucket:
      // DeepSpeed 0.19 reads it only without all_gather_into_tensor (torch < 1.13), so one value.
      return {kDeepSpeedBucket};
    case Knob::kPrefetchBucket:
      // Python's int(0.9 * h * h), as the HF Trainer fills "auto".
      return {kDeepSpeedPrefetch, static_cast<int64_t>(0.9 * static_cast<double>(h2))};
    case Knob::kMaxLive:
      // Lowering it trades prefetch for memory, which the prefetch list already covers.
      return {kDeepSpeedMaxLive};
    case Knob::kPersistenceThreshold:
      return {kDeepSpeedPersistence, 10 * hidden};
    case Knob::kSubGroupSize:
      return {kDeepSpeedSubGroup};
  }
  return {};
}

KnobValues dedupe(KnobValues v) {
  KnobValues out;
  for (int64_t x : v) {
    if (!contains(out, x)) out.push_back(x);
  }
  return out;
}

// The lists one stage actually varies: a knob the stage does not read collapses to DeepSpeed's
// default (what the written ds_config will say), an offload the stage cannot do is dropped.
std::array<KnobValues, kNumKnobs> stage_lists(const SearchSpace& s, int64_t stage,
                                              const KnobValues& persistence_by_effect) {
  std::array<KnobValues, kNumKnobs> l = s.values;
  l[index(Knob::kStage)] = {stage};
  auto keep = [&](Knob k, std::initializer_list<int64_t> allowed) {
    KnobValues out;
    for (int64_t x : l[index(k)]) {
      if (std::find(allowed.begin(), allowed.end(), x) != allowed.end()) out.push_back(x);
    }
    l[index(k)] = out;
  };
  if (stage == 0) keep(Knob::kOffloadOptimizer, {kNone});
  if (stage == 1 || stage == 2) keep(Knob::kOffloadOptimizer, {kNone, kCpu});
  if (stage != 3) keep(Knob::kOffloadParam, {kNone});
  if (stage == 0) {
    l[index(Knob::kOverlapComm)] = {0};  // DeepSpeed's default for stage 0; it is not read
    l[index(Knob::kReduceBucket)] = {kDeepSpeedBucket};
  }
  // Stage 3's IPG buffer is not doubled by overlap_comm (ref §2.2 item 5), so turning it off
  // saves no memory and only serializes communication with compute: not in the default search.
  if (stage == 3 && !s.given[index(Knob::kOverlapComm)]) l[index(Knob::kOverlapComm)] = {1};
  if (stage != 1 && stage != 2) l[index(Knob::kAllgatherBucket)] = {kDeepSpeedBucket};
  if (stage != 3) {
    l[index(Knob::kPrefetchBucket)] = {kDeepSpeedPrefetch};
    l[index(Knob::kMaxLive)] = {kDeepSpeedMaxLive};
    l[index(Knob::kPersistenceThreshold)] = {kDeepSpeedPersistence};
    l[index(Knob::kSubGroupSize)] = {kDeepSpeedSubGroup};
  } else if (!persistence_by_effect.empty()) {
    l[index(Knob::kPersistenceThreshold)] = persistence_by_effect;
  }
  return l;
}

// Default persistence thresholds that keep a different set of parameters resident: DeepSpeed
// keeps a parameter gathered iff numel <= threshold, so two thresholds with no parameter size
// between them behave identically.
KnobValues persistence_by_effect(const models::Model& model, const KnobValues& thresholds) {
  std::vector<int64_t> sizes;
  for (const models::Layer& layer : model.layers()) {
    for (const models::Module& m : layer.modules) {
      if (!m.tied_to.empty()) continue;
      for (const models::Param& prm : m.params) sizes.push_back(prm.numel);
    }
  }
  std::sort(sizes.begin(), sizes.end());
  std::set<size_t> seen;
  KnobValues out;
  for (int64_t t : thresholds) {
    size_t key =
        static_cast<size_t>(std::upper_bound(sizes.begin(), sizes.end(), t) - sizes.begin());
    if (seen.insert(key).second) out.push_back(t);
  }
  return out;
}

}  // namespace

sim::OffloadDevice Candidate::offload_optimizer() const {
  return static_cast<OffloadDevice>(v[index(Knob::kOffloadOptimizer)]);
}
sim::OffloadDevice Candidate::offload_param() const {
  return static_cast<OffloadDevice>(v[index(Knob::kOffloadParam)]);
}
int Candidate::offload_level() const {
  return static_cast<int>(
      std::max(v[index(Knob::kOffloadOptimizer)], v[index(Knob::kOffloadParam)]));
}
int Candidate::family() const {
  return static_cast<int>(v[index(Knob::kStage)] * 9 + v[index(Knob::kOffloadOptimizer)] * 3 +
                          v[index(Knob::kOffloadParam)]) +
         36 * comm.family();
}

CommVariant CommVariant::of(const sim::ZeroConfig& z) {
  CommVariant v;
  if (z.stage != 3) return v;
  if (z.hpz()) v.hpz = z.hpz_partition_size;
  v.qwz = z.quantized_weights;
  v.qgz = z.quantized_gradients;
  if (z.mics()) {
    v.mics = z.mics_shard_size;
    v.mics_hier = z.mics_hierarchical_params_gather;
  }
  return v;
}

std::string family_name(const Candidate& c) {
  static const char* const kDevice[] = {"", "CPU", "NVMe"};
  std::string s = "ZeRO-" + std::to_string(c.stage());
  const int64_t o = c[Knob::kOffloadOptimizer], p = c[Knob::kOffloadParam];
  if (o != kNone) s += std::string(" + ") + kDevice[o] + " optimizer";
  if (p != kNone) s += std::string(" + ") + kDevice[p] + " params";
  if (!c.comm.plain()) s += " + " + comm_variant_words(c.comm);
  return s;
}

std::string comm_variant_words(const CommVariant& v) {
  if (v.zeropp()) {
    std::string parts;
    auto part = [&](const std::string& x) { parts += (parts.empty() ? "" : ", ") + x; };
    if (v.hpz > 1) part("hpZ " + std::to_string(v.hpz));
    if (v.qwz) part("qwZ");
    if (v.qgz) part("qgZ");
    return "ZeRO++ (" + parts + ")";
  }
  if (v.mics > 0) {
    return "MiCS (shard " + std::to_string(v.mics) + (v.mics_hier ? ", hierarchical)" : ")");
  }
  return "";
}

std::string short_description(const Candidate& c) {
  std::string s = family_name(c) + ", micro-batch " + std::to_string(c[Knob::kMicroBatch]) +
                  " x gas " + std::to_string(c.gas);
  if (c[Knob::kCheckpointing] == 1) s += ", checkpointing";
  if (c[Knob::kCheckpointing] == 2) s += ", checkpointing to CPU";
  return s;
}

SearchSpace resolve_search_space(const Problem& problem, const KnobRequest& knobs,
                                 const BatchRequest& batch) {
  if (!(problem.headroom >= 0 && problem.headroom < 1)) {
    throw InputError("--headroom",
                     "must be a fraction in [0, 1), got " + strformat("%g", problem.headroom));
  }
  SearchSpace s;
  s.batch = resolve_batch(problem, knobs, batch);
  const int64_t hidden = problem.model.shape().hidden;
  for (int i = 0; i < kNumKnobs; ++i) {
    Knob k = static_cast<Knob>(i);
    s.given[i] = knobs.given(k);
    s.source[i] = knobs.source(k);
    s.values[i] = s.given[i] ? knobs.values(k) : dedupe(default_list(k, hidden));
  }
  s.values[index(Knob::kMicroBatch)] = micro_batches(problem, knobs, batch, s.batch, &s.notes);
  // --gas pins the micro-batch: it counts as given.
  if (batch.gradient_accumulation) s.given[index(Knob::kMicroBatch)] = true;
  check_triples(s);
  check_stage_knobs(s);
  return s;
}

std::vector<Candidate> enumerate_candidates(const Problem& problem, const SearchSpace& space,
                                            const EnumerateOptions& options) {
  KnobValues persistence;
  if (options.dedupe_by_effect && !space.given[index(Knob::kPersistenceThreshold)]) {
    persistence =
        persistence_by_effect(problem.model, space.values[index(Knob::kPersistenceThreshold)]);
  }
  std::vector<std::array<KnobValues, kNumKnobs>> per_stage;
  double total = 0;
  for (int64_t stage : space.values[index(Knob::kStage)]) {
    per_stage.push_back(stage_lists(space, stage, persistence));
    double n = 1;
    for (const KnobValues& l : per_stage.back()) n *= static_cast<double>(l.size());
    total += n;
  }
  if (total > kMaxGridSize) {
    throw InputError("--knob", "the grid has " + std::to_string(static_cast<int64_t>(total)) +
                                   " configurations, more than the 2000000 zplan evaluates; "
                                   "narrow some lists");
  }
  std::vector<Candidate> out;
  out.reserve(static_cast<size_t>(total));
  for (const auto& lists : per_stage) {
    bool empty = false;
    for (const KnobValues& l : lists) empty = empty || l.empty();
    if (empty) continue;
    // An odometer over the lists, the last knob turning fastest.
    std::array<size_t, kNumKnobs> at{};
    while (true) {
      Candidate c;
      for (int i = 0; i < kNumKnobs; ++i) c.v[i] = lists[i][at[i]];
      c.gas = space.batch.per_gpu / c[Knob::kMicroBatch];
      if (triple_rule(c[Knob::kStage], c[Knob::kOffloadOptimizer], c[Knob::kOffloadParam]) ==
          nullptr) {
        out.push_back(c);
      }
      int i = kNumKnobs - 1;
      while (i >= 0 && ++at[i] == lists[i].size()) at[i--] = 0;
      if (i < 0) break;
    }
  }
  return out;
}

sim::DsConfig base_config(const Problem& problem, const BatchPlan& batch) {
  // DsConfig's own defaults are DeepSpeed 0.19's; stage 0 leaves overlap_comm off (ZeroConfig).
  sim::DsConfig d;
  d.precision = problem.precision;
  d.grad_accum_dtype = problem.precision;  // data_types.grad_accum_dtype defaults to the model's
  d.zero.stage = 0;
  d.zero.overlap_comm = false;
  d.train_batch_size = batch.global_batch;
  d.micro_batch = batch.per_gpu;  // global_batch / GPUs
  d.gradient_accumulation_steps = 1;
  // AutoTP is the user's choice (--autotp): every candidate keeps it.
  if (problem.workload.tensor_parallel > 1) {
    d.other["tensor_parallel"] = {{"autotp_size", problem.workload.tensor_parallel}};
  }
  return d;
}

sim::DsConfig to_ds_config(const Candidate& c, const sim::DsConfig& base, const Problem& problem) {
  sim::DsConfig d = base;
  sim::ZeroConfig& z = d.zero;
  z.stage = c.stage();
  z.offload_optimizer.device = c.offload_optimizer();
  z.offload_param.device = c.offload_param();
  if (z.offload_optimizer.device == OffloadDevice::kNvme) {
    z.offload_optimizer.nvme_path = problem.nvme_path;
  }
  if (z.offload_param.device == OffloadDevice::kNvme) {
    z.offload_param.nvme_path = problem.nvme_path;
    // Every swapped tensor's per-rank slice must fit one swap buffer (sim/swap_buffers.h).
    z.offload_param.buffer_size = sim::param_swap_buffer_size(
        problem.model, sim::data_parallel_ranks(problem.cluster, problem.workload), d);
  }
  z.overlap_comm = c[Knob::kOverlapComm] != 0;
  z.reduce_bucket_size = c[Knob::kReduceBucket];
  z.allgather_bucket_size = c[Knob::kAllgatherBucket];
  z.prefetch_bucket_size = c[Knob::kPrefetchBucket];
  z.max_live_parameters = c[Knob::kMaxLive];
  z.param_persistence_threshold = c[Knob::kPersistenceThreshold];
  z.sub_group_size = c[Knob::kSubGroupSize];
  z.contiguous_gradients = true;  // DeepSpeed's default, and forced with stage 1/2 offload
  z.hpz_partition_size = c.comm.hpz;
  z.quantized_weights = c.comm.qwz;
  z.quantized_gradients = c.comm.qgz;
  z.mics_shard_size = c.comm.mics;
  z.mics_hierarchical_params_gather = c.comm.mics_hier;
  // A mixture of experts at stage 3 is planned with each MoE block a ZeRO-3 leaf, one gather a
  // block (DeepSpeed 0.19 makes Mixtral's and Qwen's blocks leaves by default; another class is
  // listed), which also keeps ranks whose tokens reach different experts from hanging
  // (docs/models.md, "Mixture of experts").
  if (std::string cls = sim::missing_moe_leaf_class(problem.model, z); !cls.empty()) {
    z.leaf_module.classes.push_back(cls);
  }
  d.micro_batch = c[Knob::kMicroBatch];
  d.gradient_accumulation_steps = c.gas;
  d.train_batch_size =
      c[Knob::kMicroBatch] * c.gas * sim::data_parallel_ranks(problem.cluster, problem.workload);
  d.activation_checkpointing.enabled = c[Knob::kCheckpointing] != 0;
  d.activation_checkpointing.cpu_checkpointing = c[Knob::kCheckpointing] == 2;
  return d;
}

}  // namespace zplan::planner
