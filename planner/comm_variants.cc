#include "planner/comm_variants.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "base/text.h"
#include "sim/memory_model.h"
#include "sim/zeropp_mics.h"

namespace zplan::planner {

namespace {

// A change in inter-node bytes smaller than this is "unchanged": printed to the percent it
// would read "-0%", which is no reason for anything.
constexpr double kBytesUnchanged = 0.01;

// "12.3 ms", "0.41 ms", "2.1 s".
std::string seconds_words(double s) {
  if (s >= 1) return strformat("%.1f s", s);
  return s >= 0.01 ? strformat("%.1f ms", 1e3 * s) : strformat("%.2f ms", 1e3 * s);
}

// The fixed latency (NCCL's per-hop latency times the hops, and the launch) of one all-gather
// of `bytes` in the group a variant gathers in, against the world's: why fewer ranks per ring
// pay less latency (hardware::collective_cost, reference/nccl_hardware.md §1, §5). MiCS gathers
// in its shard (hierarchical: an inter-node hop, then an intra-node one), hpZ's backward in its
// secondary group; nullopt for qwZ/qgZ alone, whose gathers span every rank.
struct GatherLatency {
  double world_s = 0;
  double group_s = 0;
  int group_ranks = 0;
};
std::optional<GatherLatency> gather_latency(const hardware::Cluster& cl,
                                            const sim::ZeroConfig& zero, double bytes) {
  using hardware::Collective;
  const sim::ZeroGroups groups = sim::zero_groups(zero, cl);
  auto latency = [&](sim::CommGroup g) {
    return sim::group_collective_cost(cl, Collective::kAllGather, bytes, g).latency_s;
  };
  GatherLatency out;
  out.world_s = latency(groups.world);
  if (zero.mics()) {
    out.group_ranks = groups.partition.ranks;
    out.group_s = groups.hierarchical ? latency(groups.shard_inter) + latency(groups.shard_intra)
                                      : latency(groups.partition);
  } else if (zero.hpz()) {
    out.group_ranks = groups.secondary.ranks;
    out.group_s = latency(groups.secondary);
  } else {
    return std::nullopt;
  }
  return out;
}

// The index of the plain config `c` is a variant of, if it was evaluated.
std::optional<size_t> plain_of(const SearchResult& s, const Candidate& c) {
  for (size_t i = 0; i < s.candidates.size(); ++i) {
    const Candidate& o = s.candidates[i];
    if (o.comm.plain() && o.v == c.v && o.gas == c.gas) return i;
  }
  return std::nullopt;
}

}  // namespace

std::vector<Candidate> comm_variants(const Problem& problem, const Candidate& base) {
  std::vector<Candidate> out;
  const hardware::Cluster& cl = problem.cluster;
  // AutoTP: ZeRO++ and MiCS are not modelled with it (sim::check_tensor_parallel).
  if (cl.nodes <= 1 || base.stage() != 3 || !base.comm.plain() ||
      problem.workload.tensor_parallel > 1) {
    return out;
  }
  const int n = cl.gpus, g = cl.gpus_per_node();
  const bool param_offload = base.offload_param() != sim::OffloadDevice::kNone;
  const bool opt_offload = base.offload_optimizer() != sim::OffloadDevice::kNone;
  auto add = [&](CommVariant v) {
    Candidate c = base;
    c.comm = v;
    out.push_back(c);
  };
  // ZeRO++: hpZ groups dividing the node (groups.py needs them to divide the world too), with
  // and without qwZ and qgZ; hpZ is not modelled with parameter offload.
  std::vector<int64_t> hpz_sizes = {1};
  if (!param_offload) {
    for (int h = 2; h <= g; ++h) {
      if (g % h == 0 && n % h == 0) hpz_sizes.push_back(h);
    }
  }
  for (int64_t h : hpz_sizes) {
    for (int q = 0; q < 4; ++q) {
      CommVariant v;
      v.hpz = h;
      v.qwz = (q & 1) != 0;
      v.qgz = (q & 2) != 0;
      if (!v.plain()) add(v);
    }
  }
  // MiCS: shards of a divisor of the node or of 2^i whole nodes, dividing the cluster and
  // smaller than it (a shard of every rank is ZeRO-3). With replicas DeepSpeed refuses optimizer
  // offload; parameter offload is not modelled.
  if (!opt_offload && !param_offload) {
    std::vector<int64_t> shards;
    for (int s = 2; s <= g; ++s) {
      if (g % s == 0) shards.push_back(s);
    }
    for (int64_t s = 2 * static_cast<int64_t>(g); s < n; s *= 2) shards.push_back(s);
    for (int64_t s : shards) {
      if (s >= n || n % s != 0) continue;
      CommVariant v;
      v.mics = s;
      add(v);
      if (s > g) {
        v.mics_hier = true;
        add(v);
      }
    }
  }
  return out;
}

void add_comm_variants(const Problem& problem, const EvalOptions& options, SearchResult* s) {
  if (problem.cluster.nodes <= 1 || options.comm == CommSearch::kNone) return;
  std::vector<Candidate> variants;
  std::vector<double> base_speed;  // of each variant's plain config
  size_t bases = 0;
  for (size_t i : s->order) {
    if (!s->evals[i].fits()) break;
    const Candidate& c = s->candidates[i];
    if (c.stage() != 3 || !c.comm.plain()) continue;
    for (Candidate& v : comm_variants(problem, c)) {
      if (options.comm == CommSearch::kLossless && v.comm.lossy()) continue;
      variants.push_back(v);
      base_speed.push_back(s->evals[i].tokens_per_s);
    }
    if (++bases == kCommVariantBases) break;
  }
  if (variants.empty()) return;
  EvalOptions quiet = options;
  quiet.progress = nullptr;
  SearchStats stats;
  std::vector<Evaluation> evals = evaluate_all(problem, s->space, variants, quiet, &stats);
  // Only the kept ones count as searched (each was simulated and fits), so that the counts
  // describe the candidates the result holds; the engine's work counts whole.
  for (size_t v = 0; v < variants.size(); ++v) {
    if (evals[v].fits() && evals[v].tokens_per_s > base_speed[v] * (1 + kCommVariantMargin)) {
      s->candidates.push_back(variants[v]);
      s->evals.push_back(evals[v]);
      ++s->stats.generated;
      ++s->stats.simulated;
      ++s->stats.fitting;
    }
  }
  s->stats.wall_s += stats.wall_s;
  s->stats.graphs_run += stats.graphs_run;
  s->stats.graphs_reused += stats.graphs_reused;
  s->stats.tasks_run += stats.tasks_run;
  s->stats.tasks_jumped += stats.tasks_jumped;
  s->stats.steps_reused += stats.steps_reused;
}

std::string comm_variant_reason(const Problem& problem, const SearchResult& s, size_t i) {
  const Candidate& c = s.candidates[i];
  if (c.comm.plain()) return "";
  const hardware::Cluster& cl = problem.cluster;
  const int g = cl.gpus_per_node();
  const sim::DsConfig base = base_config(problem, s.space.batch);
  const sim::DsConfig config = to_ds_config(c, base, problem);
  Candidate plain = c;
  plain.comm = CommVariant{};
  const sim::DsConfig plain_config = to_ds_config(plain, base, problem);
  const sim::ZeroSizes sizes = sim::zero_sizes(problem.model, cl.gpus, config);
  const sim::CommVolume after =
      sim::stage3_comm_volume(config.zero, cl, sizes, static_cast<int>(c.gas));
  const sim::CommVolume before =
      sim::stage3_comm_volume(plain_config.zero, cl, sim::zero_sizes(problem.model, cl.gpus, plain_config),
                              static_cast<int>(c.gas));
  std::string why;
  auto part = [&](const std::string& x) { why += (why.empty() ? "" : "; ") + x; };
  const CommVariant& v = c.comm;
  if (v.hpz > 1) {
    part(strformat("ZeRO++ hpZ: a secondary copy of the parameters over %lld GPUs, so backward "
                   "all-gathers stay %s",
                   static_cast<long long>(v.hpz),
                   v.hpz <= g ? "inside the node" : "inside the hpZ group"));
  }
  // The quantized ones change numerics, and say so where they say what they save.
  if (v.qwz) {
    part(
        "qwZ: all-gathers move block-quantized int8 weights (half the bytes; forward and "
        "backward compute with their dequantized copies, lossy)");
  }
  if (v.qgz) {
    part(
        "qgZ: gradients reduced by int4 all-to-alls, inside the node then across nodes (a "
        "quarter of the inter-node bytes; the gradients carry int4 rounding error, lossy)");
  }
  if (v.mics > 0) {
    const int64_t replicas = cl.gpus / v.mics;
    part(strformat("MiCS: states partitioned over shards of %lld GPUs (%s), whose gathers and "
                   "reduce-scatters stay in the shard; one gradient all-reduce across %lld "
                   "replicas per step",
                   static_cast<long long>(v.mics),
                   v.mics <= g ? "inside a node"
                               : strformat("%lld nodes%s", static_cast<long long>(v.mics / g),
                                           v.mics_hier ? ", gathered hierarchically" : "")
                                     .c_str(),
                   static_cast<long long>(replicas)));
  }
  // What moves: the inter-node bytes, when they change at all.
  const double bytes_change = before.inter_node > 0 ? after.inter_node / before.inter_node - 1 : 0;
  const bool bytes_fall = bytes_change <= -kBytesUnchanged;
  if (before.inter_node > 0) {
    part(std::abs(bytes_change) < kBytesUnchanged
             ? std::string("inter-node bytes unchanged against plain ZeRO-3")
             : strformat("inter-node bytes %+.0f%% per step against plain ZeRO-3",
                         100 * bytes_change));
  }
  std::optional<size_t> p = plain_of(s, c);
  if (!p || !s.evals[*p].fits() || !s.evals[i].fits()) return why;
  const Evaluation& ep = s.evals[*p];
  const Evaluation& ev = s.evals[i];
  // What the gain is made of: when the fixed latency of the collectives on the critical path
  // fell by more than half of the step time gained, the gain is latency -- fewer ranks per ring
  // (the ring's latency term grows with its rank count, reference/nccl_hardware.md §1) -- and
  // the figures say so, bytes or no bytes.
  const auto comm_latency = [](const Evaluation& e) {
    return e.critical_latency_s[static_cast<int>(sim::PathPart::kAllGather)] +
           e.critical_latency_s[static_cast<int>(sim::PathPart::kReduce)];
  };
  const double gained_s = ep.step_time_s - ev.step_time_s;
  const double latency_before = comm_latency(ep), latency_after = comm_latency(ev);
  if (gained_s > 0 && latency_before - latency_after > 0.5 * gained_s) {
    std::string latency = strformat(
        "%s is latency: the collectives' fixed latency on the critical path falls from %s to %s "
        "per step (of %s gained)",
        bytes_fall ? "most of the gain" : "the gain", seconds_words(latency_before).c_str(),
        seconds_words(latency_after).c_str(), seconds_words(gained_s).c_str());
    const double fetch_bytes = sizes.param_bytes * sizes.largest_fetch;
    if (std::optional<GatherLatency> gl = gather_latency(cl, config.zero, fetch_bytes)) {
      latency += strformat(
          ", as a gather of the largest module takes %s of latency over %d "
          "ranks instead of %s over all %d",
          seconds_words(gl->group_s).c_str(), gl->group_ranks, seconds_words(gl->world_s).c_str(),
          cl.gpus);
    }
    part(latency);
  }
  part(strformat("%.1f%% faster than the same config in plain ZeRO-3",
                 100 * (ev.tokens_per_s / ep.tokens_per_s - 1)));
  return why;
}

}  // namespace zplan::planner
