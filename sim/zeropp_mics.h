// ZeRO++ (hpZ, qwZ, qgZ) and MiCS on a cluster: the communicator groups DeepSpeed 0.19 builds
// for them, what a collective inside such a group costs, the checks that need the node size, and
// the bytes a rank sends per step inside and across nodes (for the planner's explanation).
// docs/cost_model.md "ZeRO++ and MiCS" derives every term from DeepSpeed's source.
//
// Names the step graph and the memory model use for them (sim/step_builder_zeropp.cc):
//  - hpZ's secondary partition is model-dtype parameter memory that lives through the step:
//    Category::kParams16 on the GPU, p * non_persistent / hpz bytes;
//  - gathers (flat, hpZ secondary, MiCS shard, MiCS hierarchical hops, qwZ int8) are
//    TaskKind::kAllGather tasks, qgZ's two all-to-all hops are TaskKind::kReduceScatter tasks
//    (they implement the reduce-scatter), MiCS's replica all-reduce a TaskKind::kAllReduce task;
//  - qwZ's int8 and dequantized buffers are Category::kGatheredParams, qgZ's int4 buffers
//    Category::kBuckets, all transient.
#ifndef ZPLAN_SIM_ZEROPP_MICS_H_
#define ZPLAN_SIM_ZEROPP_MICS_H_

#include <string>

#include "hardware/cost_model.h"
#include "hardware/profile.h"
#include "sim/ds_config/zero_config.h"
#include "sim/step_graph.h"

namespace zplan::sim {

struct ZeroSizes;

// A communicator of `ranks` ranks on `nodes` nodes (ranks / nodes on each), while every GPU of
// the job is in one such group at the same time (so groups with fewer ranks per node than the
// job share the node's NICs).
struct CommGroup {
  int ranks = 1;
  int nodes = 1;
  int ranks_per_node() const { return ranks / nodes; }
};

// The groups of a stage-3 config on a cluster (consecutive ranks fill a node first, as
// DeepSpeed's launcher places them).
struct ZeroGroups {
  CommGroup world;      // every data-parallel rank
  CommGroup partition;  // the states' partition group: the world, or the MiCS shard
  CommGroup secondary;  // hpZ: the secondary partition's group (min(hpz, world) ranks)
  CommGroup replica;    // MiCS: ranks with the same index in every shard (1 rank without MiCS)
  // mics_hierarchical_params_gather (mics_utils.py create_mics_comm_groups): an inter-node hop
  // among the shard's ranks of the same local index, then an intra-node hop.
  bool hierarchical = false;
  CommGroup shard_inter;
  CommGroup shard_intra;
  // qgZ (coalesced_collectives.py all_to_all_quant_reduce): on more than one node, an intra-node
  // all-to-all among the node's GPUs, then an inter-node one among the ranks of the same local
  // index.
  bool qgz = false;
  CommGroup node;
  CommGroup across_nodes;
};
ZeroGroups zero_groups(const ZeroConfig& zero, const hardware::Cluster& cluster);
// The group `id` of `groups`.
CommGroup group_of(const ZeroGroups& groups, CommGroupId id);
// Which group of kind `id` holds `rank` (ranks with the same color form one group, ranked in
// rank order), as DeepSpeed builds them: hpZ groups and MiCS shards of consecutive ranks
// (groups.py _create_zero_param_parallel_group, mics_utils.py _generate_mics_config), replica
// groups of the ranks with one index in every shard, the hierarchical gather's intra-node groups
// of the shard's ranks on one node and inter-node groups of its ranks with one local index
// (mics_utils.py create_mics_comm_groups); qgZ's node and across-nodes groups likewise.
int group_color(const ZeroGroups& groups, CommGroupId id, int rank);
// `rank`'s index in its group of kind `id`.
int group_rank(const ZeroGroups& groups, CommGroupId id, int rank);

// Collective `op` of `bytes` (nccl-tests' S) inside `group`: hardware::collective_cost of a
// cluster of the group's size, with the network bandwidth it gets when the node's other GPUs
// run their own groups at the same time (a group with one rank per node gets 1/ranks_per_node
// of the node's NICs, not a whole NIC).
hardware::CollectiveCost group_collective_cost(const hardware::Cluster& cluster,
                                               hardware::Collective op, double bytes,
                                               CommGroup group);

// An all-to-all in which every rank holds `bytes` and sends (n-1)/n of it: priced as the
// all-gather of the same total buffer, which sends the same bytes per rank over the same links
// [est: NCCL runs all-to-all as grouped send/recv; with every rank sending to every other the
// per-rank link load is the all-gather's].
hardware::CollectiveCost group_all_to_all_cost(const hardware::Cluster& cluster, double bytes,
                                               CommGroup group);

// qwZ's fp32 scale per quantization group: CUDAQuantizer aims at groups below 8000 elements
// (partition_parameters.py target_group_size), so about 4 bytes per 8000 elements.
inline constexpr double kQwzScaleBytesPerElem = 4.0 / 8000;
bool qwz_active(const ZeroConfig& zero);  // quantized weights on a stage-3 gather (not MiCS)

// Bytes a stage-3 gather of `fetch` elements (partition group of `ranks` ranks) holds while it
// runs, besides the gathered parameters themselves (p * fetch): ZeRO-3's flat all-gather output
// (p * fetch, freed after the per-parameter torch.cat, ref §2.2 item 8); qwZ's int8 output and
// its dequantized fp16 copy (partition_parameters.py AllGatherCoalescedHandle.wait); nothing for
// MiCS's flat gather, which writes into the parameters (mics.py
// _flat_all_gather_with_coalescing_manager), and the inter-node output's clone for its
// hierarchical one (_hierarchical_all_gather_params).
double gather_transient_bytes(const ZeroConfig& zero, const ZeroGroups& groups, double p,
                              double fetch);
// Bytes stage 3's reduction of a gradient bucket of `elems` elements holds while it runs: the
// interleaved copy reduce_scatter_coalesced builds (p * elems, ref §2.2 item 10), or with qgZ
// one tensor's int4 buffers at a time (coalesced_collectives.py all_to_all_quant_reduce: the
// swizzled int4 input and the all-to-all output, M/2 bytes each, the node's reduced int4 share
// and its exchange, M/(2g) each, and the dequantized fp16 share, 2M/g) for its largest tensor
// `largest`.
double reduce_transient_bytes(const ZeroGroups& groups, double p, double elems, double largest);

// "" when groups of `ranks` consecutive ranks each lie inside one node of `gpus_per_node` GPUs or
// hold whole nodes (the size divides the node's GPUs or they divide it); else the one-line
// "not modelled: <what> of 4 consecutive ranks split nodes of 6 GPUs ..." problem. DeepSpeed
// forms hpZ groups, MiCS shards and Ulysses groups of consecutive ranks and its launcher fills a
// node first, so any other size puts some groups across a node boundary (12 ranks on nodes of 6
// in groups of 4: ranks 4-7 are two on each node), which zero_groups does not describe.
std::string groups_split_nodes(const char* what, int64_t ranks, int gpus_per_node);

// The checks of ZeRO++ and MiCS that need the node size; throws InputError naming `where` and
// the key. DeepSpeed asserts a hierarchical MiCS gather spans more than one node
// (mics_utils.py); zplan models hpZ groups and MiCS shards that hold whole nodes or fit in one,
// and refuses the others (groups_split_nodes).
void check_zeropp_mics_cluster(const ZeroConfig& zero, const hardware::Cluster& cluster,
                               const std::string& where);
// Lines for the user when a key has no effect on this cluster (qgZ on one node), else empty.
std::string zeropp_mics_note(const ZeroConfig& zero, const hardware::Cluster& cluster);

// Bytes one rank sends per optimizer step in stage 3's parameter gathers and gradient
// reductions, across nodes and inside a node, by the hierarchical view of each collective
// (reference/nccl_hardware.md §5: a collective over k nodes of g GPUs moves (k-1)/k of a
// node's share over the NICs): one gather per non-persistent parameter in forward and one in
// backward per micro-step, one reduction of every gradient per micro-step.
struct CommVolume {
  double inter_node = 0;
  double intra_node = 0;
};
CommVolume stage3_comm_volume(const ZeroConfig& zero, const hardware::Cluster& cluster,
                              const ZeroSizes& sizes, int gradient_accumulation_steps);

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_ZEROPP_MICS_H_
