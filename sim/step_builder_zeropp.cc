// Stage 3's parameter gathers and gradient reductions as DeepSpeed 0.19 issues them, with and
// without ZeRO++ (hpZ, qwZ, qgZ) and MiCS. docs/cost_model.md "ZeRO++ and MiCS" derives each
// term; "ref §x" = reference/deepspeed_internals.md. Memory-bound kernels (copies, quantize,
// dequantize) run on the collective's stream and are counted into its task as fixed time, as
// step_builder_stage3.cc does for ZeRO-3's own copies.
#include <algorithm>

#include "hardware/cost_model.h"
#include "sim/step_builder.h"
#include "sim/step_builder_internal.h"

namespace zplan::sim {

using hardware::Collective;

namespace {

// `launches` memory-bound kernels moving `bytes` in all.
double kernels_s(const hardware::GpuSpec& gpu, double bytes, int launches) {
  if (launches <= 0) return 0;
  return hardware::memory_bound_time_s(gpu, bytes) + (launches - 1) * gpu.kernel_launch_s;
}

bool same_group(CommGroup a, CommGroup b) { return a.ranks == b.ranks && a.nodes == b.nodes; }

}  // namespace

Task StepBuilder::group_task(TaskKind kind, Resource resource, Collective op, double bytes,
                             CommGroupId id) const {
  const CommGroup group = group_of(groups_, id);
  if (same_group(group, groups_.world)) {
    Task t = collective_task(kind, resource, op, bytes);
    t.group = id;
    return t;
  }
  const GroupCostEntry* hit = nullptr;
  for (const GroupCostEntry& e : group_cost_cache_) {
    if (e.op == op && e.bytes == bytes && e.ranks == group.ranks && e.nodes == group.nodes) {
      hit = &e;
      break;
    }
  }
  if (hit == nullptr) {
    group_cost_cache_.push_back(GroupCostEntry{
        op, bytes, group.ranks, group.nodes, group_collective_cost(cluster_, op, bytes, group)});
    hit = &group_cost_cache_.back();
  }
  const hardware::CollectiveCost& c = hit->cost;
  Task t;
  t.kind = kind;
  t.resource = resource;
  t.group = id;
  t.latency_s = c.latency_s;
  t.work_s = c.transfer_s;
  t.link = c.link == hardware::Link::kNetwork  ? LinkSlot::kNetwork
           : c.link == hardware::Link::kNone ? LinkSlot::kNone
                                               : LinkSlot::kIntraNode;
  t.bytes = bytes;
  const double n = group.ranks;
  t.wire_bytes = (op == Collective::kAllReduce ? 2.0 : 1.0) * (n - 1) / n * bytes;
  return t;
}

double StepBuilder::qgz_vector_limit() const {
  // A bias or norm weight has at most a few hidden sizes of elements (the MLP's bias has the
  // intermediate size); a weight matrix has hidden x something.
  const models::ModelShape& m = model_.shape();
  return std::max<double>(4.0 * m.hidden, static_cast<double>(m.ffn));
}

std::vector<Task> StepBuilder::param_gather_tasks(Resource stream, double fetch,
                                                  bool secondary) const {
  const hardware::GpuSpec& gpu = cluster_.profile.gpu;
  const ZeroConfig& z = config_.zero;
  const double p = sizes_.param_bytes;
  const CommGroupId gid = secondary ? CommGroupId::kSecondary : CommGroupId::kPartition;
  const double part = fetch / group_of(groups_, gid).ranks;  // elements each rank contributes
  std::vector<Task> out;
  if (z.mics()) {
    if (!groups_.hierarchical) {
      // mics.py _flat_all_gather_with_coalescing_manager: one coalesced all_gather over the
      // shard group straight into the parameters' buffers -- no flat buffer, no torch.cat.
      out.push_back(group_task(TaskKind::kAllGather, stream, Collective::kAllGather, p * fetch,
                               CommGroupId::kPartition));
      return out;
    }
    // _hierarchical_all_gather_params: the shard's ranks of this local index gather across
    // nodes (synchronously), the result is cloned and copied into place, then the node gathers.
    const double inter = p * part * groups_.shard_inter.ranks;
    Task t1 = group_task(TaskKind::kAllGather, stream, Collective::kAllGather, inter,
                         CommGroupId::kShardInter);
    t1.latency_s += kernels_s(gpu, 4 * inter, 2);
    out.push_back(t1);
    out.push_back(group_task(TaskKind::kAllGather, stream, Collective::kAllGather, p * fetch,
                             CommGroupId::kShardIntra));
    return out;
  }
  if (!qwz_active(z)) {
    // _all_gather_dtype: this rank's partition (or hpZ's secondary one) into the flat buffer,
    // one all_gather_into_tensor, the per-parameter torch.cat out of it (ref §2.2 item 8).
    Task ag = group_task(TaskKind::kAllGather, stream, Collective::kAllGather, p * fetch, gid);
    ag.latency_s += hardware::memory_bound_time_s(gpu, 2 * (p * part + p * fetch));
    out.push_back(ag);
    return out;
  }
  // qwZ, partition_parameters.py _all_gather_coalesced(quantize=True): torch.cat of the
  // partitions, CUDAQuantizer.quantize (a cast to fp16 unless the model is fp16, then int8 plus
  // one fp32 scale per group), two all-gathers (the int8 data, the scales); then
  // AllGatherCoalescedHandle.wait: dequantize to fp16, torch.cat per parameter and a cast back
  // to the model dtype unless it is fp16.
  const bool fp16 = config_.precision == Precision::kFp16;
  const double scales = kQwzScaleBytesPerElem * fetch;
  const double before = 2 * p * part + (fp16 ? 0 : (p + 2) * part) + 3 * part;
  const double after = 3 * fetch + 4 * fetch + (fp16 ? 0 : (2 + p) * fetch);
  Task data = group_task(TaskKind::kAllGather, stream, Collective::kAllGather, fetch, gid);
  data.latency_s += kernels_s(gpu, before, fp16 ? 2 : 3);
  Task scale = group_task(TaskKind::kAllGather, stream, Collective::kAllGather, scales, gid);
  scale.latency_s += kernels_s(gpu, after, fp16 ? 2 : 3);
  out.push_back(data);
  out.push_back(scale);
  return out;
}

StepBuilder::ReducePlan StepBuilder::grad_reduce_tasks(Resource stream,
                                                       const PendingBucket& bucket,
                                                       bool boundary) const {
  const hardware::GpuSpec& gpu = cluster_.profile.gpu;
  const ZeroConfig& z = config_.zero;
  const double p = sizes_.param_bytes, a = sizes_.grad_accum_bytes;
  ReducePlan plan;
  if (groups_.qgz) {
    // coalesced_collectives.py all_to_all_quant_reduce, tensor by tensor: swizzle_quant to
    // int4, an all-to-all inside the node (data, then scales), quantized_reduction of the g
    // pieces into the node's share re-quantized to int4, an all-to-all across nodes (data,
    // scales), dequantize to fp16 and the sum of the k node chunks. Vectors (dim 1) take
    // reduce_scatter_coalesced one by one instead.
    const double g = groups_.node.ranks, k = groups_.across_nodes.ranks;
    const double m = bucket.elems - bucket.vector_elems;  // elements of the matrices
    const int mats = bucket.tensors - bucket.vectors;
    if (mats > 0) {
      Task intra = group_task(TaskKind::kReduceScatter, stream, Collective::kAllGather, 0.5 * m,
                              CommGroupId::kNode);
      intra.latency_s = 2 * mats * intra.latency_s +
                        kernels_s(gpu, p * m + 0.5 * m + 0.5 * m + 0.5 * m / g, 2 * mats);
      Task inter = group_task(TaskKind::kReduceScatter, stream, Collective::kAllGather,
                              0.5 * m / g, CommGroupId::kAcrossNodes);
      inter.latency_s = 2 * mats * inter.latency_s +
                        kernels_s(gpu, 0.5 * m / g + 2 * m / g + 2 * m / g + 2 * m / (g * k),
                                  2 * mats);
      plan.tasks.push_back(intra);
      plan.tasks.push_back(inter);
    }
    if (bucket.vectors > 0) {
      Task rs = collective_task(TaskKind::kReduceScatter, stream, Collective::kReduceScatter,
                                p * bucket.vector_elems);
      rs.latency_s = bucket.vectors * rs.latency_s +
                     kernels_s(gpu, 2 * p * bucket.vector_elems, bucket.vectors);
      plan.tasks.push_back(rs);
    }
    plan.reduced = plan.tasks.size() - 1;
    return plan;
  }
  // reduce_scatter_coalesced over the partition group (the MiCS shard's: MiCS_Optimizer sets
  // dp_process_group to it), ref §2.2 item 10. With "reduce_scatter": false and contiguous
  // gradients, a bucket no larger than reduce_bucket_size is all-reduced whole and each rank
  // keeps its slices (__reduce_and_partition_ipg_grads -> __avg_scatter_contiguous_grads,
  // stage3.py; ref §4.2): twice the bytes on the wire.
  const bool all_reduce =
      !z.reduce_scatter && z.contiguous_gradients && bucket.elems <= sizes_.bucket;
  plan.tasks.push_back(
      all_reduce ? group_task(TaskKind::kAllReduce, stream, Collective::kAllReduce,
                              p * bucket.elems, CommGroupId::kPartition)
                 : group_task(TaskKind::kReduceScatter, stream, Collective::kReduceScatter,
                              p * bucket.elems, CommGroupId::kPartition));
  plan.reduced = 0;
  if (z.mics() && boundary && groups_.replica.ranks > 1) {
    // mics.py allreduce_mics_shard_grads: at the boundary, the bucket's accumulated gradient
    // partitions are scaled (scale_tensors) and all-reduced across the replica group.
    const double bytes = a * bucket.elems / groups_.partition.ranks;
    Task ar = group_task(TaskKind::kAllReduce, stream, Collective::kAllReduce, bytes,
                         CommGroupId::kReplica);
    ar.latency_s += hardware::memory_bound_time_s(gpu, 2 * bytes);
    plan.tasks.push_back(ar);
  }
  return plan;
}

}  // namespace zplan::sim
