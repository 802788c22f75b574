// ZeRO++ and MiCS groups, their collectives' costs and volumes. "ref §x" =
// reference/deepspeed_internals.md; DeepSpeed files are under deepspeed/ of DeepSpeed 0.19.
#include "sim/zeropp_mics.h"

#include <algorithm>

#include "base/input_error.h"
#include "base/text.h"
#include "sim/memory_model.h"

namespace zplan::sim {

namespace {

// `ranks` consecutive ranks: inside one node, or over whole nodes (checked by
// check_zeropp_mics_cluster; a group that would split a node is rounded up to whole nodes).
CommGroup consecutive(int ranks, int gpus_per_node) {
  CommGroup g;
  g.ranks = std::max(1, ranks);
  g.nodes = g.ranks <= gpus_per_node ? 1 : (g.ranks + gpus_per_node - 1) / gpus_per_node;
  return g;
}

// Inter- and intra-node bytes one rank sends in collective `op` of `bytes` inside `g`, by the
// hierarchical view (ref nccl_hardware §5): a rail hop among the group's nodes carries 1/r of
// the buffer, the intra-node hop all of it.
CommVolume volume_of(hardware::Collective op, double bytes, CommGroup g) {
  CommVolume v;
  const double k = g.nodes, r = g.ranks_per_node();
  const double factor = op == hardware::Collective::kAllReduce ? 2 : 1;
  v.inter_node = factor * (k - 1) / k * bytes / r;
  v.intra_node = factor * (r - 1) / r * bytes;
  return v;
}

void add(CommVolume& total, const CommVolume& v, double times) {
  total.inter_node += times * v.inter_node;
  total.intra_node += times * v.intra_node;
}

}  // namespace

ZeroGroups zero_groups(const ZeroConfig& z, const hardware::Cluster& cluster) {
  const int n = cluster.gpus, g = cluster.gpus_per_node();
  ZeroGroups out;
  out.world = CommGroup{n, cluster.nodes};
  out.partition = out.world;
  if (z.mics()) out.partition = consecutive(static_cast<int>(z.mics_shard_size), g);
  out.secondary = out.partition;
  // groups.py _create_zero_param_parallel_group: min(hpz, world) consecutive ranks.
  if (z.hpz()) out.secondary = consecutive(static_cast<int>(std::min<int64_t>(z.hpz_partition_size, n)), g);
  if (z.mics()) {
    // mics_utils.py _generate_mics_config: replicate group i = rank i of every shard.
    const int s = out.partition.ranks;
    out.replica.ranks = std::max(1, n / s);
    out.replica.nodes = s >= g ? out.replica.ranks : cluster.nodes;
    // create_mics_comm_groups: span_nodes = shard // devices per node must exceed 1.
    if (z.mics_hierarchical_params_gather && out.partition.nodes > 1) {
      out.hierarchical = true;
      out.shard_inter = CommGroup{out.partition.nodes, out.partition.nodes};
      out.shard_intra = CommGroup{out.partition.ranks_per_node(), 1};
    }
  }
  // stage3.py __avg_scatter_grads: the all-to-all path only with more than one node.
  if (z.stage == 3 && z.quantized_gradients && cluster.nodes > 1) {
    out.qgz = true;
    out.node = CommGroup{g, 1};
    out.across_nodes = CommGroup{cluster.nodes, cluster.nodes};
  }
  return out;
}

CommGroup group_of(const ZeroGroups& groups, CommGroupId id) {
  switch (id) {
    case CommGroupId::kWorld:
      return groups.world;
    case CommGroupId::kPartition:
      return groups.partition;
    case CommGroupId::kSecondary:
      return groups.secondary;
    case CommGroupId::kReplica:
      return groups.replica;
    case CommGroupId::kShardInter:
      return groups.shard_inter;
    case CommGroupId::kShardIntra:
      return groups.shard_intra;
    case CommGroupId::kNode:
      return groups.node;
    case CommGroupId::kAcrossNodes:
      return groups.across_nodes;
  }
  return groups.world;
}

int group_color(const ZeroGroups& groups, CommGroupId id, int rank) {
  const int shard = groups.partition.ranks;
  switch (id) {
    case CommGroupId::kWorld:
      return 0;
    case CommGroupId::kPartition:
      return rank / shard;
    case CommGroupId::kSecondary:
      return rank / groups.secondary.ranks;
    case CommGroupId::kReplica:
      return rank % shard;
    case CommGroupId::kShardInter: {
      const int per_node = std::max(1, groups.shard_intra.ranks);
      return rank / shard * per_node + rank % per_node;
    }
    case CommGroupId::kShardIntra:
      return rank / std::max(1, groups.shard_intra.ranks);
    case CommGroupId::kNode:
      return rank / std::max(1, groups.node.ranks);
    case CommGroupId::kAcrossNodes:
      return rank % std::max(1, groups.node.ranks);
  }
  return 0;
}

int group_rank(const ZeroGroups& groups, CommGroupId id, int rank) {
  const int color = group_color(groups, id, rank);
  int below = 0;
  for (int r = 0; r < rank; ++r) below += group_color(groups, id, r) == color;
  return below;
}

hardware::CollectiveCost group_collective_cost(const hardware::Cluster& cluster,
                                               hardware::Collective op, double bytes,
                                               CommGroup group) {
  hardware::Cluster sub = cluster;
  sub.gpus = group.ranks;
  sub.nodes = group.nodes;
  hardware::CollectiveCost cost = hardware::collective_cost(sub, op, bytes);
  const int ppn = group.ranks_per_node(), job_ppn = cluster.gpus_per_node();
  if (group.nodes > 1 && ppn < job_ppn) {
    // The job's GPUs on a node all run a group like this one at once; together they get the
    // NICs the whole job would, each group its share, where the cost model alone would give a
    // lone group at least a whole NIC.
    const hardware::Profile& p = cluster.profile;
    const double intra = p.node.intra_busbw_bytes_per_s;
    const double alone = std::min(intra, hardware::node_network_bw(p, ppn));
    const double shared = std::min(intra, hardware::node_network_bw(p, job_ppn) * ppn / job_ppn);
    if (shared > 0 && alone > shared) cost.transfer_s *= alone / shared;
  }
  return cost;
}

hardware::CollectiveCost group_all_to_all_cost(const hardware::Cluster& cluster, double bytes,
                                               CommGroup group) {
  return group_collective_cost(cluster, hardware::Collective::kAllGather, bytes, group);
}

bool qwz_active(const ZeroConfig& z) { return z.stage == 3 && z.quantized_weights && !z.mics(); }

double gather_transient_bytes(const ZeroConfig& z, const ZeroGroups& groups, double p,
                              double fetch) {
  if (z.mics()) {
    if (!groups.hierarchical) return 0;
    return p * fetch / groups.shard_intra.ranks;
  }
  if (qwz_active(z)) return (1 + 2 + kQwzScaleBytesPerElem) * fetch;
  return p * fetch;
}

double reduce_transient_bytes(const ZeroGroups& groups, double p, double elems, double largest) {
  if (!groups.qgz) return p * elems;
  const double g = groups.node.ranks;
  return (1 + 3 / g) * std::min(largest, elems);
}

std::string groups_split_nodes(const char* what, int64_t ranks, int gpus_per_node) {
  const int64_t g = gpus_per_node;
  if (ranks <= 1 || g % ranks == 0 || ranks % g == 0) return "";
  return strformat(
      "not modelled: %s of %lld consecutive ranks split nodes of %lld GPUs (some "
      "span two nodes); use a divisor or a multiple of %lld",
      what, static_cast<long long>(ranks), static_cast<long long>(g), static_cast<long long>(g));
}

void check_zeropp_mics_cluster(const ZeroConfig& z, const hardware::Cluster& cluster,
                               const std::string& where) {
  if (z.stage != 3) return;
  const int n = cluster.gpus, g = cluster.gpus_per_node();
  if (z.hpz()) {
    const std::string problem =
        groups_split_nodes("hpZ groups", std::min<int64_t>(z.hpz_partition_size, n), g);
    if (!problem.empty()) {
      throw InputError(json_location(where, "/zero_optimization/zero_hpz_partition_size"), problem);
    }
  }
  if (z.mics()) {
    const int64_t s = z.mics_shard_size;
    const std::string problem = groups_split_nodes("MiCS shards", s, g);
    if (!problem.empty()) {
      throw InputError(json_location(where, "/zero_optimization/mics_shard_size"), problem);
    }
    if (z.mics_hierarchical_params_gather && s / g <= 1) {
      throw InputError(
          json_location(where, "/zero_optimization/mics_hierarchical_params_gather"),
          "needs shards spanning more than one node, but mics_shard_size " + std::to_string(s) +
              " fits in a node of " + std::to_string(g) +
              " GPUs (DeepSpeed asserts \"sharding spans on single node, no need for hierarchy "
              "allgather\", mics_utils.py)");
    }
  }
}

std::string zeropp_mics_note(const ZeroConfig& z, const hardware::Cluster& cluster) {
  if (z.stage == 3 && z.quantized_gradients && cluster.nodes == 1) {
    return "zero_quantized_gradients has no effect on one node: DeepSpeed reduce-scatters as "
           "usual (stage3.py __avg_scatter_grads takes the all-to-all path only with more than "
           "one node)";
  }
  return "";
}

CommVolume stage3_comm_volume(const ZeroConfig& z, const hardware::Cluster& cluster,
                              const ZeroSizes& s, int gas) {
  using hardware::Collective;
  CommVolume total;
  if (z.stage != 3) return total;
  const ZeroGroups groups = zero_groups(z, cluster);
  const double p = s.param_bytes, a = s.grad_accum_bytes;
  // qwZ gathers int8 plus an fp32 scale per quantization group.
  const double gather_bytes = (qwz_active(z) ? 1 + kQwzScaleBytesPerElem : p) * s.non_persistent;
  const CommVolume primary = volume_of(Collective::kAllGather, gather_bytes, groups.partition);
  const CommVolume secondary = volume_of(Collective::kAllGather, gather_bytes, groups.secondary);
  // hpZ: the first micro-step's forward gathers the primary partition; every later gather finds
  // the secondary one (it lives until step() calls invalidate_secondary_tensor).
  add(total, primary, 1);
  add(total, z.hpz() ? secondary : primary, 2.0 * gas - 1);
  // Gradients of the trainable parameters only (frozen ones have none).
  if (groups.qgz) {
    // all_to_all_quant_reduce: int4 of the whole gradient inside the node, then int4 of the
    // node's 1/g share across nodes.
    const double g = groups.node.ranks;
    add(total, volume_of(Collective::kAllGather, 0.5 * s.train_psi, groups.node), gas);
    add(total, volume_of(Collective::kAllGather, 0.5 * s.train_psi / g, groups.across_nodes), gas);
  } else {
    add(total, volume_of(Collective::kReduceScatter, p * s.train_psi, groups.partition), gas);
  }
  if (z.mics() && groups.replica.ranks > 1) {
    // mics.py allreduce_mics_shard_grads at the boundary: the accumulated partitions.
    add(total, volume_of(Collective::kAllReduce, a * s.partition, groups.replica), 1);
  }
  return total;
}

}  // namespace zplan::sim
