#include "planner/plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "models/input_error.h"
#include "planner/text.h"

namespace zplan::planner {

namespace {

constexpr int kGpu = static_cast<int>(sim::Tier::kGpu);
constexpr int kPinned = static_cast<int>(sim::Tier::kPinnedHost);
constexpr int kHost = static_cast<int>(sim::Tier::kHost);
constexpr int kNvme = static_cast<int>(sim::Tier::kNvme);

// A critical-path part counts as binding when it is this much of the step: below it, the step
// is "compute-bound" (the rest is noise a real run varies by more).
constexpr double kComputeBound = 0.90;
// A loser is called "<part>-bound" only when that part is this much of its step; below, the
// part merely grew ("more exposed gradient reduction").
constexpr double kBinds = 0.10;
// Parts under 1% of the step are not worth a word.
constexpr double kMentionShare = 0.01;
// Two throughputs this close are "as fast": the simulator's own error is several percent.
constexpr double kSameSpeed = 0.001;
// Alternatives shown: at most this many, diverse (one per stage/offload family).
constexpr size_t kMaxAlternatives = 5;
constexpr size_t kMaxFittingAlternatives = 3;
// min_gpus_to_fit searches up to this many nodes.
constexpr int kMaxNodes = 4096;

const char* kBoundNames[sim::kNumPathParts] = {
    "compute-bound", "all-gather-bound", "gradient-reduction-bound",
    "PCIe-bound",    "CPU-Adam-bound",   "NVMe-bound"};

double share(const Evaluation& e, int part) {
  return e.step_time_s > 0 ? e.critical_path_s[part] / e.step_time_s : 0;
}

// "23%", or "2.4%" below 10% where the decimal still says something.
std::string percent(double fraction) {
  return fraction < 0.1 ? strf("%.1f%%", 100 * fraction) : strf("%.0f%%", 100 * fraction);
}

std::string exposed_list(const Evaluation& e, int skip) {
  std::string s;
  for (int p = 1; p < sim::kNumPathParts; ++p) {
    if (p == skip || share(e, p) < kMentionShare) continue;
    s += strf(", exposed %s %s", sim::path_part_name(static_cast<sim::PathPart>(p)),
              percent(share(e, p)).c_str());
  }
  return s;
}

const char* device_words(int64_t level) { return level == 2 ? "NVMe" : "CPU memory"; }

std::string offload_words(const Candidate& c) {
  const int64_t o = c[Knob::kOffloadOptimizer], p = c[Knob::kOffloadParam];
  if (o != 0 && p != 0) {
    return o == p ? strf("optimizer states and parameters to %s", device_words(o))
                  : strf("optimizer states to %s and parameters to %s", device_words(o),
                         device_words(p));
  }
  if (o != 0) return strf("optimizer states to %s", device_words(o));
  return strf("parameters to %s", device_words(p));
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

// The candidate of a family that needs the least memory within `space`'s lists (and DeepSpeed's
// and Hugging Face's default values): micro-batch 1, checkpointing, the smallest buffers.
Candidate frugal_candidate(const SearchSpace& space, int64_t hidden, int stage, int64_t opt,
                           int64_t param) {
  auto min_of = [&](Knob k, std::initializer_list<int64_t> extra) {
    int64_t m = *std::min_element(space.values[index(k)].begin(), space.values[index(k)].end());
    for (int64_t x : extra) m = std::min(m, x);
    return m;
  };
  Candidate c;
  c.v[index(Knob::kStage)] = stage;
  c.v[index(Knob::kOffloadOptimizer)] = opt;
  c.v[index(Knob::kOffloadParam)] = param;
  c.v[index(Knob::kMicroBatch)] = 1;
  c.v[index(Knob::kCheckpointing)] = 1;
  // Without overlap_comm stages 1-2 keep one IPG buffer instead of two; stage 3 the same one.
  c.v[index(Knob::kOverlapComm)] = stage == 3 ? 1 : 0;
  const int64_t h2 = hidden * hidden;
  c.v[index(Knob::kReduceBucket)] =
      stage == 0 ? kDeepSpeedBucket : min_of(Knob::kReduceBucket, {h2});
  c.v[index(Knob::kAllgatherBucket)] = kDeepSpeedBucket;
  c.v[index(Knob::kPrefetchBucket)] =
      stage == 3 ? min_of(Knob::kPrefetchBucket, {static_cast<int64_t>(0.9 * h2)})
                 : kDeepSpeedPrefetch;
  c.v[index(Knob::kMaxLive)] = stage == 3 ? min_of(Knob::kMaxLive, {}) : kDeepSpeedMaxLive;
  c.v[index(Knob::kPersistenceThreshold)] =
      stage == 3 ? min_of(Knob::kPersistenceThreshold, {10 * hidden}) : kDeepSpeedPersistence;
  c.v[index(Knob::kSubGroupSize)] = kDeepSpeedSubGroup;
  c.gas = 1;
  return c;
}

// Every valid (stage, optimizer offload, parameter offload) offloading at most max_level, least
// offloading first, then by stage: the order in which "what would fit" names the first that
// does. With `within`, only those its stage and offload lists hold.
std::vector<std::array<int64_t, 3>> families(int max_level, const SearchSpace* within) {
  auto allowed = [&](Knob k, int64_t v) {
    if (within == nullptr) return true;
    const KnobValues& list = within->values[index(k)];
    return std::find(list.begin(), list.end(), v) != list.end();
  };
  std::vector<std::array<int64_t, 3>> out;
  for (int level = 0; level <= max_level; ++level) {
    for (int64_t stage = 0; stage <= 3; ++stage) {
      for (int64_t o = 0; o <= 2; ++o) {
        for (int64_t p = 0; p <= 2; ++p) {
          if (std::max(o, p) != level) continue;
          if (p != 0 && stage != 3) continue;
          if (o == 2 && stage != 3) continue;
          if (o != 0 && stage == 0) continue;
          if (!allowed(Knob::kStage, stage) || !allowed(Knob::kOffloadOptimizer, o) ||
              !allowed(Knob::kOffloadParam, p)) {
            continue;
          }
          out.push_back({stage, o, p});
        }
      }
    }
  }
  return out;
}

// Whether the space's stage and offload lists leave out some valid family.
bool lists_restrict_families(const SearchSpace& space) {
  return families(2, &space).size() < families(2, nullptr).size();
}

// The node counts "what would fit" tries: up to kMaxNodes, and no more GPUs than an int holds.
int max_nodes_to_try(const Problem& problem) {
  const int gpn = std::max(1, problem.cluster.profile.node.gpus_per_node);
  return std::min(kMaxNodes, std::numeric_limits<int>::max() / gpn);
}

struct FitCheck {
  bool fits = false;
  Candidate how;
  double gpu_peak_bytes = 0;
};

// Whether some family's frugal config fits `problem` by the analytic bound (with headroom): of
// every family, or with `within_lists` of those the space's lists hold.
FitCheck any_frugal_fits(const Problem& problem, const SearchSpace& space, int max_level,
                         bool within_lists) {
  BatchPlan batch;
  batch.global_batch = problem.cluster.gpus;
  batch.per_gpu = 1;
  const sim::DsConfig base = base_config(problem, batch);
  for (const auto& f : families(max_level, within_lists ? &space : nullptr)) {
    Candidate c =
        frugal_candidate(space, problem.model.shape().hidden, static_cast<int>(f[0]), f[1], f[2]);
    sim::DsConfig config = to_ds_config(c, base, problem);
    sim::MemoryReport m =
        sim::analyze_memory(problem.model, problem.cluster, config, problem.workload);
    if (m.fits(problem.headroom)) return {true, c, m.tiers[kGpu].peak_bytes};
  }
  return {};
}

std::string fit_words(const Problem& problem, const FitCheck& f) {
  return strf("%s, micro-batch 1, checkpointing (GPU peak %s of %s by the analytic bound)",
              family_name(f.how).c_str(), gib(f.gpu_peak_bytes).c_str(),
              gib(problem.cluster.profile.gpu.memory_bytes).c_str());
}

std::string gpu_count_words(const Problem& problem, const GpuCount& g) {
  return strf("%d GPUs (%d node%s of %d): %s, micro-batch 1, checkpointing (GPU peak %s of %s)",
              g.gpus, g.nodes, g.nodes == 1 ? "" : "s", g.gpus / g.nodes,
              family_name(g.how).c_str(), gib(g.gpu_peak_bytes).c_str(),
              gib(g.gpu_capacity_bytes).c_str());
}

std::optional<GpuCount> min_gpus(const Problem& problem, const SearchSpace& space,
                                 int max_offload_level, bool within_lists);

// ": --seq-len S fits on these GPUs (...)" or ": --seq-len S fits on N GPUs (...)" for the
// longest halved sequence (down to 128) with which a family of the space's lists fits, or "".
std::string shorter_sequence_words(const Problem& problem, const SearchSpace& space) {
  Problem shorter = problem;
  for (int64_t seq = problem.workload.seq_len / 2; seq >= 128; seq /= 2) {
    shorter.workload.seq_len = seq;
    FitCheck here = any_frugal_fits(shorter, space, 2, /*within_lists=*/true);
    if (here.fits) {
      return strf(": --seq-len %lld fits on these GPUs with ", static_cast<long long>(seq)) +
             fit_words(shorter, here);
    }
    if (std::optional<GpuCount> g = min_gpus(shorter, space, 2, /*within_lists=*/true)) {
      return strf(": --seq-len %lld fits on ", static_cast<long long>(seq)) +
             gpu_count_words(shorter, *g);
    }
  }
  return "";
}

// Why no GPU count up to max_nodes_to_try nodes fits, judged by the frugal config with the
// smallest GPU peak on the largest cluster tried, among the families the space's lists hold. More
// GPUs shrink partitioned model states, but neither the fixed runtime (CUDA context, NCCL
// buffers) nor a sample's activations: data parallelism keeps whole samples on every GPU. The
// larger of activations (with the allocator's fragmentation on them) and what is left (model
// states, gathered parameters, buckets) is named the blocker.
// With `name_sequence`, a sequence that would fit is named (what_would_fit says it otherwise).
std::string why_no_gpu_count_fits(const Problem& problem, const SearchSpace& space,
                                  bool name_sequence) {
  Problem big = problem;
  const int gpn = problem.cluster.profile.node.gpus_per_node;
  const int nodes = std::max(problem.cluster.nodes, max_nodes_to_try(problem));
  big.cluster = hardware::make_cluster(problem.cluster.profile, nodes * gpn, nodes);
  BatchPlan batch;
  batch.global_batch = big.cluster.gpus;
  batch.per_gpu = 1;
  const sim::DsConfig base = base_config(big, batch);
  // "nothing fits", or with lists that leave families out, what they allow.
  const bool restricted = lists_restrict_families(space);
  const std::string nothing =
      restricted ? "with the --stage / --offload-* lists given, nothing fits" : "nothing fits";
  const char* how_far = restricted ? "as far as those lists allow" : "as far as ZeRO goes";
  std::optional<sim::MemoryReport> least;
  for (const auto& f : families(2, &space)) {
    Candidate c =
        frugal_candidate(space, problem.model.shape().hidden, static_cast<int>(f[0]), f[1], f[2]);
    sim::MemoryReport m =
        sim::analyze_memory(big.model, big.cluster, to_ds_config(c, base, big), big.workload);
    if (!least || m[sim::Tier::kGpu].peak_bytes < (*least)[sim::Tier::kGpu].peak_bytes) least = m;
  }
  const hardware::RuntimeSpec& rt = problem.cluster.profile.runtime;
  const double usable = problem.cluster.profile.gpu.memory_bytes * (1 - problem.headroom);
  const sim::TierSummary& g = (*least)[sim::Tier::kGpu];
  const double runtime = rt.cuda_context_bytes + rt.nccl_buffer_bytes;
  const double activations =
      (g.at_peak[sim::Category::kActivations] + g.at_peak[sim::Category::kCheckpoints]) *
      (1 + rt.allocator_fragmentation);
  const double states = std::max(0.0, g.peak_bytes - runtime - activations);
  if (g.peak_bytes <= usable) {
    // The GPU fits; a per-node tier does not, and more nodes do not shrink it enough.
    const sim::MemoryReport& m = *least;
    const double keep = 1 - problem.headroom;
    const bool host = !m.host_fits(problem.headroom);
    const double peak = host ? m.host_peak_bytes : m[sim::Tier::kNvme].peak_bytes;
    const double cap = (host ? m[sim::Tier::kHost] : m[sim::Tier::kNvme]).capacity_bytes;
    return nothing + strf(
                         " even on %d nodes of this hardware: GPU memory would do, but %s per "
                         "node does not (peak %s of %s usable)",
                         nodes, host ? "host memory" : "NVMe", gib(peak).c_str(),
                         gib(cap * keep).c_str());
  }
  if (runtime > usable) {
    return nothing + strf(
                         " on any number of these GPUs: the CUDA context and NCCL buffers alone "
                         "take %s of the %s usable per GPU",
                         gib(runtime).c_str(), gib(usable).c_str());
  }
  const std::string peak = strf(
      "GPU peak %s of %s usable: activations %s, model states and buffers %s, CUDA context "
      "and NCCL %s",
      gib(g.peak_bytes).c_str(), gib(usable).c_str(), gib(activations).c_str(), gib(states).c_str(),
      gib(runtime).c_str());
  // Activations are the blocker when they are the larger part, or when the model states (as
  // partitioned as they get) would fit without them.
  if (activations >= states || states + runtime <= usable) {
    return nothing +
           " on any number of these GPUs: one sample's activations at micro-batch 1 with full "
           "checkpointing leave too little room beside the model states, and more GPUs do not "
           "shrink them (each data-parallel GPU holds whole samples); a shorter sequence does" +
           (name_sequence ? shorter_sequence_words(problem, space) : std::string()) + " (" + peak +
           ")";
  }
  return nothing +
         strf(
             " even on %d nodes of this hardware: the model states and buffers, partitioned and "
             "offloaded %s, still exceed GPU memory (",
             nodes, how_far) +
         peak + ")";
}

// The smallest whole-node count above the current one on which a frugal config fits (see
// min_gpus_to_fit), of every family or with `within_lists` of the space's.
std::optional<GpuCount> min_gpus(const Problem& problem, const SearchSpace& space,
                                 int max_offload_level, bool within_lists) {
  const int gpn = problem.cluster.profile.node.gpus_per_node;
  if (gpn < 1) return std::nullopt;
  const int max_nodes = max_nodes_to_try(problem);
  auto check = [&](int nodes) -> std::optional<GpuCount> {
    Problem p = problem;
    p.cluster = hardware::make_cluster(problem.cluster.profile, nodes * gpn, nodes);
    FitCheck f = any_frugal_fits(p, space, max_offload_level, within_lists);
    if (!f.fits) return std::nullopt;
    return GpuCount{nodes * gpn, nodes, f.how, f.gpu_peak_bytes,
                    problem.cluster.profile.gpu.memory_bytes};
  };
  // Whole nodes, from the first count with more GPUs than now: exponential search, then
  // bisection (memory per GPU and per node never grows with more nodes).
  int fail = problem.cluster.gpus / gpn;  // node counts known (or assumed) not to fit
  int hi = fail + 1;
  std::optional<GpuCount> found;
  while (hi <= max_nodes) {  // the largest count tried is max_nodes itself
    found = check(hi);
    if (found) break;
    fail = hi;
    if (hi == max_nodes) break;
    hi = std::min(max_nodes, 2 * hi);  // no overflow: max_nodes <= kMaxNodes
  }
  if (!found) return std::nullopt;
  while (hi - fail > 1) {
    int mid = fail + (hi - fail) / 2;
    if (auto f = check(mid)) {
      hi = mid;
      found = f;
    } else {
      fail = mid;
    }
  }
  return found;
}

// Lines starting with `more` ("more GPUs") for the smallest counts without offload (`plain`) and
// with any (`any`).
void add_more_gpus_lines(const Problem& problem, const std::string& more,
                         const std::optional<GpuCount>& plain, const std::optional<GpuCount>& any,
                         std::vector<std::string>* out) {
  if (plain && (!any || any->gpus >= plain->gpus)) {
    out->push_back(more + ": " + gpu_count_words(problem, *plain));
  } else {
    if (any) out->push_back(more + ", with offload: " + gpu_count_words(problem, *any));
    if (plain) out->push_back(more + ", without offload: " + gpu_count_words(problem, *plain));
  }
}

// Lines saying what would fit when nothing in the search does.
std::vector<std::string> what_would_fit(const Problem& problem, const SearchResult& s,
                                        size_t closest) {
  std::vector<std::string> out;
  // 1. The same GPUs, lists widened to every stage and offload with checkpointing, micro-batch 1.
  FitCheck here = any_frugal_fits(problem, s.space, 2, /*within_lists=*/false);
  if (here.fits) {
    out.push_back("on these GPUs: " + fit_words(problem, here) +
                  "; widen --stage / --offload-* / --checkpointing / --micro-batch to include it");
  }
  // 2. More GPUs, without offload and with it, keeping the stage and offload lists.
  std::optional<GpuCount> plain = min_gpus_to_fit(problem, s.space, 0);
  std::optional<GpuCount> any = min_gpus_to_fit(problem, s.space, 2);
  add_more_gpus_lines(problem, "more GPUs", plain, any, &out);
  // 2b. When the lists fit no count, other families might, but only those that offload less
  // than what already fits on these GPUs are worth more GPUs.
  if (!plain && !any && lists_restrict_families(s.space)) {
    const int below = here.fits ? here.how.offload_level() : 3;
    auto offloads_less = [&](std::optional<GpuCount> g) {
      return g && g->how.offload_level() < below ? g : std::nullopt;
    };
    add_more_gpus_lines(problem, "more GPUs and other --stage / --offload-* values",
                        offloads_less(min_gpus(problem, s.space, 0, false)),
                        offloads_less(min_gpus(problem, s.space, 2, false)), &out);
  }
  // 3. Activations: a shorter sequence, when they dominate the nearest miss.
  bool named_sequence = false;
  const Evaluation& e = s.evals[closest];
  const sim::Category dom = e.at_peak[kGpu].dominant();
  if (e.gpu_over_bytes > 0 &&
      (dom == sim::Category::kActivations || dom == sim::Category::kCheckpoints)) {
    Problem shorter = problem;
    for (int64_t seq = problem.workload.seq_len / 2; seq >= 128; seq /= 2) {
      shorter.workload.seq_len = seq;
      FitCheck f = any_frugal_fits(shorter, s.space, 2, /*within_lists=*/false);
      if (f.fits) {
        out.push_back(
            strf("a shorter sequence: --seq-len %lld fits with ", static_cast<long long>(seq)) +
            fit_words(shorter, f));
        named_sequence = true;
        break;
      }
    }
  }
  // Why the lists fit on no count, unless they do on these GPUs with micro-batch 1 and
  // checkpointing (a cluster past the counts tried; line 1 covers it).
  if (!plain && !any && !any_frugal_fits(problem, s.space, 2, /*within_lists=*/true).fits) {
    out.push_back(why_no_gpu_count_fits(problem, s.space, !named_sequence));
  }
  return out;
}

std::vector<std::string> needs_lines(const Problem& problem, const Candidate& c,
                                     const Evaluation& e, const sim::DsConfig& config,
                                     const std::string& file) {
  std::vector<std::string> out;
  const hardware::Cluster& cl = problem.cluster;
  if (cl.nodes > 1) {
    out.push_back(
        strf("launch: deepspeed --hostfile hostfile --num_nodes %d --num_gpus %d "
             "train.py --deepspeed %s",
             cl.nodes, cl.gpus_per_node(), file.c_str()));
  } else {
    out.push_back(
        strf("launch: deepspeed --num_gpus %d train.py --deepspeed %s", cl.gpus, file.c_str()));
  }
  out.push_back(strf(
      "train on sequences of %lld tokens: the prediction and the batch keys "
      "(train_batch_size %lld = micro-batch %lld x gas %lld x %d GPUs) assume it",
      static_cast<long long>(problem.workload.seq_len),
      static_cast<long long>(config.train_batch_size), static_cast<long long>(config.micro_batch),
      static_cast<long long>(config.gradient_accumulation_steps), cl.gpus));
  if (c[Knob::kCheckpointing]) {
    out.push_back(
        "activation checkpointing: turn it on in the model -- Hugging Face: "
        "model.gradient_checkpointing_enable(); Megatron-DeepSpeed: --checkpoint-activations; "
        "else wrap each block in deepspeed.checkpointing.checkpoint -- the "
        "activation_checkpointing block only configures DeepSpeed's implementation");
  }
  if (problem.workload.flash_attention) {
    out.push_back(
        "attention: the prediction assumes a fused kernel (FlashAttention or PyTorch "
        "SDPA); without one, re-plan with --no-flash-attention");
  }
  if (c.offload_level() > 0) {
    out.push_back(
        "offload: let DeepSpeed build the optimizer (an \"optimizer\" block, e.g. "
        "AdamW) or pass DeepSpeedCPUAdam; DeepSpeed refuses a plain torch optimizer "
        "with offload, and compiles its cpu_adam op at first use (needs a C++ "
        "toolchain, or DS_BUILD_CPU_ADAM=1 at install)");
    out.push_back(strf(
        "host memory: %s per node of %s at the peak (%s pinned)", gib(e.host_peak_bytes).c_str(),
        gib(cl.profile.node.host_memory_bytes).c_str(), gib(e.peak_bytes[kPinned]).c_str()));
  }
  if (c.offload_level() == 2) {
    out.push_back(
        strf("NVMe: nvme_path is \"%s\" -- point it at a local NVMe mount with at "
             "least %s free per node (--nvme-path); DeepSpeed's async_io op needs "
             "libaio (ds_report shows async_io [OKAY])",
             problem.nvme_path.c_str(), gib(e.peak_bytes[kNvme]).c_str()));
  }
  return out;
}

}  // namespace

SearchResult run_search(const Problem& problem, const KnobRequest& knobs, const BatchRequest& batch,
                        const EvalOptions& options) {
  SearchResult s;
  s.space = resolve_search_space(problem, knobs, batch);
  s.candidates = enumerate_candidates(problem, s.space);
  if (s.candidates.empty()) {
    throw InputError("--stage", "the lists leave no valid configuration to evaluate");
  }
  s.evals = evaluate_all(problem, s.space, s.candidates, options, &s.stats);
  s.order = rank_order(problem.cluster, s.evals);
  s.pareto = pareto_front(s.evals);
  return s;
}

std::string what_binds(const Evaluation& e) {
  if (!e.simulated || e.step_time_s <= 0) return "not simulated";
  const double compute = share(e, 0);
  if (compute >= kComputeBound) {
    return strf("compute-bound: compute %.0f%% of the step (MFU %.0f%%)", 100 * compute,
                100 * e.mfu) +
           exposed_list(e, 0);
  }
  int worst = 1;
  for (int p = 2; p < sim::kNumPathParts; ++p) {
    if (e.critical_path_s[p] > e.critical_path_s[worst]) worst = p;
  }
  return strf("%s: exposed %s %.0f%% of the step, compute %.0f%%", kBoundNames[worst],
              sim::path_part_name(static_cast<sim::PathPart>(worst)), 100 * share(e, worst),
              100 * compute) +
         exposed_list(e, worst);
}

std::string shortfall(const Problem& problem, const Evaluation& e) {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : "; ") + part; };
  if (e.gpu_over_bytes > 0) {
    const sim::MemoryBreakdown& b = e.at_peak[kGpu];
    sim::Category d = b.dominant();
    add(strf("OOM by %s on GPU at %s (peak %s of %s usable; %s %.0f%%)",
             shortfall_size(e.gpu_over_bytes).c_str(), sim::phase_name(e.gpu_peak_phase),
             gib(e.peak_bytes[kGpu]).c_str(),
             gib(problem.cluster.profile.gpu.memory_bytes * (1 - problem.headroom)).c_str(),
             category_words(static_cast<int>(d)).c_str(), 100 * b[d] / b.total()));
  }
  if (e.host_over_bytes > 0) {
    auto [d, frac] = host_dominant(e);
    add(strf("host memory short by %s per node (peak %s of %s usable; %s %.0f%%)",
             shortfall_size(e.host_over_bytes).c_str(), gib(e.host_peak_bytes).c_str(),
             gib(problem.cluster.profile.node.host_memory_bytes * (1 - problem.headroom)).c_str(),
             category_words(d).c_str(), 100 * frac));
  }
  if (e.nvme_over_bytes > 0) {
    add(strf(
        "NVMe short by %s per node (peak %s of %s usable)",
        shortfall_size(e.nvme_over_bytes).c_str(), gib(e.peak_bytes[kNvme]).c_str(),
        gib(problem.cluster.profile.node.nvme_capacity_bytes * (1 - problem.headroom)).c_str()));
  }
  return s.empty() ? "fits" : s;
}

std::string why_it_wins(const Problem& problem, const SearchResult& s, size_t w) {
  const Evaluation& e = s.evals[w];
  const Candidate& c = s.candidates[w];
  std::string line = what_binds(e);
  // Against the best fitting config of another stage/offload family that offloads no more.
  std::optional<size_t> other;
  bool other_family_exists = false;
  for (size_t i : s.order) {
    const Candidate& ci = s.candidates[i];
    if (ci.family() == c.family() || ci.offload_level() > c.offload_level()) continue;
    other_family_exists = true;
    if (s.evals[i].fits()) {
      other = i;
      break;
    }
  }
  if (other) {
    double gain = e.tokens_per_s / s.evals[*other].tokens_per_s - 1;
    line += gain >= kSameSpeed ? strf("; %.1f%% faster than the best other family (%s)", 100 * gain,
                                      family_name(s.candidates[*other]).c_str())
                               : strf("; as fast as the best other family (%s)%s",
                                      family_name(s.candidates[*other]).c_str(),
                                      e.peak_bytes[kGpu] < s.evals[*other].peak_bytes[kGpu]
                                          ? ", with less GPU memory"
                                          : "");
  } else if (other_family_exists) {
    line +=
        c.offload_level() == 0 ? "; no other stage fits" : "; no family that offloads less fits";
  }
  // A faster config that offloads more lost on the offload margin.
  if (!s.order.empty() && s.order[0] != w && s.evals[s.order[0]].fits()) {
    line += strf("; %s would be %.1f%% faster but offloads (see the margin rule)",
                 family_name(s.candidates[s.order[0]]).c_str(),
                 100 * (s.evals[s.order[0]].tokens_per_s / e.tokens_per_s - 1));
  }
  const double cap = problem.cluster.profile.gpu.memory_bytes;
  line += strf("; GPU peak %s of %s (%s free)", gib(e.peak_bytes[kGpu]).c_str(), gib(cap).c_str(),
               gib(cap - e.peak_bytes[kGpu]).c_str());
  return line;
}

std::string why_it_loses(const Problem& problem, const SearchResult& s, size_t w, size_t l,
                         double offload_margin) {
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
    if (cl.offload_level() > cw.offload_level()) {
      return strf(
          "%.1f%% faster in simulation, but it offloads %s; offload is recommended "
          "only when it wins by more than %.0f%% (--offload-margin)",
          100 * (ratio - 1), offload_words(cl).c_str(), 100 * offload_margin);
    }
    return strf("%.1f%% faster", 100 * (ratio - 1));
  }
  if (ratio >= 1 - kSameSpeed) {
    if (el.peak_bytes[kGpu] > ew.peak_bytes[kGpu]) {
      return strf("as fast, but uses %s more GPU memory",
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
  std::string why = strf("slower by %.1f%%: ", 100 * (1 - ratio));
  if (worst == 0) {
    double grew = ew.critical_path_s[0] > 0 ? worst_delta / ew.critical_path_s[0] : 0;
    if (cl[Knob::kCheckpointing] && !cw[Knob::kCheckpointing]) {
      why += "recomputes activations under checkpointing (compute +" + percent(grew) + ")";
    } else if (cl[Knob::kMicroBatch] < cw[Knob::kMicroBatch]) {
      why += strf("micro-batch %lld runs smaller, less efficient kernels (compute +%s)",
                  static_cast<long long>(cl[Knob::kMicroBatch]), percent(grew).c_str());
    } else {
      why += "more compute time (+" + percent(grew) +
             "; kernels slowed by the collectives they overlap)";
    }
  } else if (share(el, worst) >= kBinds) {
    why += strf("%s (exposed %s %s of its step)", kBoundNames[worst],
                sim::path_part_name(static_cast<sim::PathPart>(worst)),
                percent(share(el, worst)).c_str());
  } else {
    why += strf("more exposed %s (%s of its step)",
                sim::path_part_name(static_cast<sim::PathPart>(worst)),
                percent(share(el, worst)).c_str());
  }
  // Communication on the compute stream is the knob's doing, not the network's.
  if ((worst == 1 || worst == 2) && cl[Knob::kOverlapComm] == 0 && cl.stage() > 0) {
    why += ", overlap_comm off";
  }
  return why;
}

std::optional<GpuCount> min_gpus_to_fit(const Problem& problem, const SearchSpace& space,
                                        int max_offload_level) {
  return min_gpus(problem, space, max_offload_level, /*within_lists=*/true);
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
  // The recommendation: the smallest offload level whose best is within the margin of the best.
  const size_t best = s.order[0];
  const int best_level = s.candidates[best].offload_level();
  size_t rec = best;
  for (int level = 0; level < best_level; ++level) {
    std::optional<size_t> at;
    for (size_t i : s.order) {
      if (!s.evals[i].fits()) break;
      if (s.candidates[i].offload_level() <= level) {
        at = i;
        break;
      }
    }
    if (at &&
        s.evals[best].tokens_per_s <= s.evals[*at].tokens_per_s * (1 + options.offload_margin)) {
      rec = *at;
      break;
    }
  }
  r.recommended = rec;
  r.why = why_it_wins(problem, s, rec);
  const Candidate& crec = s.candidates[rec];

  // Alternatives: the faster offloading config the margin passed over, the same family without
  // checkpointing when the winner checkpoints, then the best of each other family -- those that
  // fit first, then the nearest misses among families that offload no more than the winner.
  std::vector<size_t> alts;
  auto add = [&](size_t i) {
    if (i != rec && !in_list(alts, i) && alts.size() < kMaxAlternatives) alts.push_back(i);
  };
  if (best != rec) add(best);
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
  for (size_t k = 0; k < fitting.size() && k < kMaxFittingAlternatives; ++k) add(fitting[k]);
  // Misses, highest stage first among the least offloading: "why not simply ZeRO-3?"
  std::stable_sort(simpler_misses.begin(), simpler_misses.end(), [&](size_t a, size_t b) {
    return s.candidates[a].stage() > s.candidates[b].stage();
  });
  for (size_t k = 0; k < simpler_misses.size() && k < 2; ++k) add(simpler_misses[k]);
  for (size_t i : fitting) add(i);
  for (size_t i : other_misses) add(i);
  for (size_t i : alts)
    r.alternatives.push_back({i, why_it_loses(problem, s, rec, i, options.offload_margin)});

  const sim::DsConfig config = to_ds_config(crec, base_config(problem, s.space.batch), problem);
  r.needs = needs_lines(problem, crec, s.evals[rec], config, options.ds_config_file);
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
          strf("only offloading configs fit: without offload nothing fits on %d GPU%s",
               problem.cluster.gpus, problem.cluster.gpus == 1 ? "" : "s") +
          (g ? "; it would take " + gpu_count_words(problem, *g) : std::string()));
    }
  }
  return r;
}

}  // namespace zplan::planner
