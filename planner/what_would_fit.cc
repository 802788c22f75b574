// What would fit when nothing in the search does (docs/planner.md, "When nothing fits"): the
// frugal config of each stage/offload family, checked with the analytic bound on these GPUs,
// on more of them, and with a shorter sequence.
#include "planner/what_would_fit.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "base/text.h"
#include "sim/memory_model.h"

namespace zplan::planner {

namespace {

constexpr int kGpu = static_cast<int>(sim::Tier::kGpu);

// The count search tries up to this many nodes.
constexpr int kMaxNodes = 4096;

// The candidate of a family that needs the least memory within `space`'s lists (and DeepSpeed's
// and Hugging Face's default values): micro-batch 1, checkpointing, the smallest buffers.
Candidate frugal_candidate(const SearchSpace& space, int64_t hidden, int stage, int64_t opt,
                           int64_t param, int64_t checkpointing = 1) {
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
  c.v[index(Knob::kCheckpointing)] = checkpointing;
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
// With `checkpointing` 2, the frugal configs checkpoint to host memory (cpu_checkpointing).
FitCheck any_frugal_fits(const Problem& problem, const SearchSpace& space, int max_level,
                         bool within_lists, int64_t checkpointing = 1) {
  BatchPlan batch;
  batch.global_batch = problem.cluster.gpus;
  batch.per_gpu = 1;
  const sim::DsConfig base = base_config(problem, batch);
  for (const auto& f : families(max_level, within_lists ? &space : nullptr)) {
    Candidate c = frugal_candidate(space, problem.model.shape().hidden, static_cast<int>(f[0]),
                                   f[1], f[2], checkpointing);
    sim::DsConfig config = to_ds_config(c, base, problem);
    sim::MemoryReport m =
        sim::analyze_memory(problem.model, problem.cluster, config, problem.workload);
    if (m.fit(problem.headroom).fits()) return {true, c, m.tiers[kGpu].peak_bytes};
  }
  return {};
}

std::string fit_words(const Problem& problem, const FitCheck& f) {
  return strformat("%s, micro-batch 1, checkpointing (GPU peak %s of %s by the analytic bound)",
                   family_name(f.how).c_str(), gib(f.gpu_peak_bytes).c_str(),
                   gib(problem.cluster.profile.gpu.memory_bytes).c_str());
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
      return strformat(": --seq-len %lld fits on these GPUs with ", static_cast<long long>(seq)) +
             fit_words(shorter, here);
    }
    if (std::optional<GpuCount> g = min_gpus(shorter, space, 2, /*within_lists=*/true)) {
      return strformat(": --seq-len %lld fits on ", static_cast<long long>(seq)) +
             gpu_count_words(shorter, *g, space.batch.global_batch);
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
  const sim::MemoryFit fit = least->fit(problem.headroom);
  if (fit.gpu_fits()) {
    // The GPU fits; a per-node tier does not, and more nodes do not shrink it enough.
    const double keep = 1 - problem.headroom;
    const bool host = !fit.host_fits();
    const double peak = host ? fit.peak.host : fit.peak.nvme;
    const double cap = host ? fit.capacity.host : fit.capacity.nvme;
    return nothing + strformat(
                         " even on %d nodes of this hardware: GPU memory would do, but %s per "
                         "node does not (peak %s of %s usable)",
                         nodes, host ? "host memory" : "NVMe", gib(peak).c_str(),
                         gib(cap * keep).c_str());
  }
  if (runtime > usable) {
    return nothing + strformat(
                         " on any number of these GPUs: the CUDA context and NCCL buffers alone "
                         "take %s of the %s usable per GPU",
                         gib(runtime).c_str(), gib(usable).c_str());
  }
  const std::string peak = strformat(
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
           "shrink them (each data-parallel GPU holds whole samples; at this sequence, " +
           peak + "); a shorter sequence does" +
           (name_sequence ? shorter_sequence_words(problem, space) : std::string());
  }
  return nothing +
         strformat(
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
void add_more_gpus_lines(const Problem& problem, int64_t global_batch, const std::string& more,
                         const std::optional<GpuCount>& plain, const std::optional<GpuCount>& any,
                         std::vector<std::string>* out) {
  auto words = [&](const GpuCount& g) { return gpu_count_words(problem, g, global_batch); };
  if (plain && (!any || any->gpus >= plain->gpus)) {
    out->push_back(more + ": " + words(*plain));
  } else {
    if (any) out->push_back(more + ", with offload: " + words(*any));
    if (plain) out->push_back(more + ", without offload: " + words(*plain));
  }
}

}  // namespace

std::string gpu_count_words(const Problem& problem, const GpuCount& g, int64_t global_batch) {
  std::string words = strformat(
      "%d GPUs (%d node%s of %d): %s, micro-batch 1, checkpointing (GPU peak %s of %s)", g.gpus,
      g.nodes, g.nodes == 1 ? "" : "s", g.gpus / g.nodes, family_name(g.how).c_str(),
      gib(g.gpu_peak_bytes).c_str(), gib(g.gpu_capacity_bytes).c_str());
  if (global_batch > 0 && g.gpus > global_batch) {
    words += strformat("; one sample a GPU is a global batch of %d, not %lld", g.gpus,
                       static_cast<long long>(global_batch));
  }
  return words;
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
  add_more_gpus_lines(problem, s.space.batch.global_batch, "more GPUs", plain, any, &out);
  // 2b. When the lists fit no count, other families might, but only those that offload less
  // than what already fits on these GPUs are worth more GPUs.
  if (!plain && !any && lists_restrict_families(s.space)) {
    const int below = here.fits ? here.how.offload_level() : 3;
    auto offloads_less = [&](std::optional<GpuCount> g) {
      return g && g->how.offload_level() < below ? g : std::nullopt;
    };
    add_more_gpus_lines(problem, s.space.batch.global_batch,
                        "more GPUs and other --stage / --offload-* values",
                        offloads_less(min_gpus(problem, s.space, 0, false)),
                        offloads_less(min_gpus(problem, s.space, 2, false)), &out);
  }
  // 3. Activations: a shorter sequence, when they dominate the nearest miss.
  bool named_sequence = false;
  const Evaluation& e = s.evals[closest];
  const sim::Category dom = e.at_peak[kGpu].dominant();
  if (!e.fit.gpu_fits() &&
      (dom == sim::Category::kActivations || dom == sim::Category::kCheckpoints)) {
    Problem shorter = problem;
    for (int64_t seq = problem.workload.seq_len / 2; seq >= 128; seq /= 2) {
      shorter.workload.seq_len = seq;
      FitCheck f = any_frugal_fits(shorter, s.space, 2, /*within_lists=*/false);
      if (f.fits) {
        out.push_back(strformat("a shorter sequence: --seq-len %lld fits with ",
                                static_cast<long long>(seq)) +
                      fit_words(shorter, f));
        named_sequence = true;
        break;
      }
    }
  }
  // 4. The memory tricks the search does not try by default, each alone, on these GPUs within the
  // lists: what the model code does (sdpa instead of eager attention, a fused loss) and
  // cpu_checkpointing -- where they fit offloading less than line 1's family.
  const int trick_level = here.fits ? here.how.offload_level() - 1 : 2;
  if (trick_level >= 0) {
    auto trick = [&](const Problem& p, int64_t ckpt, const std::string& words) {
      FitCheck f = any_frugal_fits(p, s.space, trick_level, /*within_lists=*/true, ckpt);
      if (f.fits) out.push_back(words + ": fits with " + fit_words(p, f));
    };
    if (!problem.workload.fused_attention() && problem.model.shape().attention_sinks) {
      // GPT-OSS: no sdpa path for its sinks; the kernels-community/vllm-flash-attn3 kernel is
      // the fused one transformers runs them with, on Hopper (check_attention_runs).
      if (problem.cluster.profile.gpu.arch == hardware::Arch::kHopper) {
        Problem flash = problem;
        flash.workload.attention = sim::Attention::kFlash3;
        trick(flash, 1,
              "attn_implementation=\"kernels-community/vllm-flash-attn3\" (--attention "
              "flash_attention_3) instead of eager");
      }
    } else if (!problem.workload.fused_attention() && problem.model.shape().qwen_names) {
      // Qwen v1's remote code: flash-attn 2 when installed, never sdpa (where flash-attn runs:
      // cli/common_options.cc check_attention_runs).
      if (flash_attn_2_could_run(problem)) {
        Problem flash = problem;
        flash.workload.attention = sim::Attention::kFlash2;
        trick(flash, 1,
              "flash-attn 2 installed (--attention flash_attention_2: Qwen v1's remote code uses "
              "it when it imports) instead of eager");
      }
    } else if (!problem.workload.fused_attention()) {
      Problem sdpa = problem;
      sdpa.workload.attention = sim::Attention::kSdpa;
      trick(sdpa, 1, "attn_implementation=\"sdpa\" (--attention sdpa) instead of eager");
    }
    if (!problem.workload.fused_loss) {
      Problem fused = problem;
      fused.workload.fused_loss = true;
      trick(fused, 1, "a fused linear + cross-entropy loss such as Liger's (--loss fused)");
    }
    trick(problem, 2,
          "checkpoints in host memory (--checkpointing cpu: cpu_checkpointing, with "
          "deepspeed.checkpointing.checkpoint in the model)");
  }
  // Why the lists fit on no count, unless they do on these GPUs with micro-batch 1 and
  // checkpointing (a cluster past the counts tried; line 1 covers it).
  if (!plain && !any && !any_frugal_fits(problem, s.space, 2, /*within_lists=*/true).fits) {
    out.push_back(why_no_gpu_count_fits(problem, s.space, !named_sequence));
  }
  return out;
}

std::optional<GpuCount> min_gpus_to_fit(const Problem& problem, const SearchSpace& space,
                                        int max_offload_level) {
  return min_gpus(problem, space, max_offload_level, /*within_lists=*/true);
}

}  // namespace zplan::planner
