// AutoTP training (docs/cost_model.md "AutoTP tensor parallelism"; DeepSpeed 0.19.5
// runtime/engine.py _configure_tensor_parallel, module_inject/layers.py): each layer's weights
// split over a tensor-parallel group of tp consecutive ranks inside a node, and ZeRO over the
// data-parallel group of the ranks with the same index in every tensor-parallel group
// (utils/groups.py _init_tp_mesh_device: a (data, tensor) device mesh of the world).
//
// The model the simulator runs is one rank's shard (models/tensor_parallel.h); this file holds
// what the shard does not say: the groups, the all-reduces of the split linears and the checks.
// Every AutoTP all-reduce is synchronous on the compute stream (torch.distributed's all_reduce
// without async_op inside an autograd function: the next kernel waits for it), so it lengthens
// the piece that runs the linear, and a recompute under activation checkpointing repeats the
// forward ones, as it reruns the layer's forward.
#ifndef ZPLAN_SIM_TENSOR_PARALLEL_H_
#define ZPLAN_SIM_TENSOR_PARALLEL_H_

#include <string>
#include <vector>

#include "hardware/profile.h"
#include "models/model.h"
#include "sim/ds_config/zero_config.h"
#include "sim/step_costs.h"
#include "sim/zeropp_mics.h"

namespace zplan::sim {

// The ranks ZeRO partitions over and reduces among: the GPUs / tensor_parallel (engine.py
// _configure_distributed_model: dp_world_size = groups._get_data_parallel_world_size()).
int data_parallel_ranks(const hardware::Cluster& cluster, const Workload& workload);
// The data-parallel group: GPUs / tp ranks, gpus-per-node / tp of them on every node (each of
// the tp groups of a node runs its collectives at the same time, sharing the node's NICs).
CommGroup data_parallel_group(const hardware::Cluster& cluster, const Workload& workload);
// The tensor-parallel group: tp consecutive ranks of one node.
CommGroup tensor_parallel_group(const Workload& workload);

// What zplan refuses for AutoTP beyond the model (models::check_tensor_parallel), as InputError
// at `where` (the ds_config's /tensor_parallel/autotp_size, or the flag): groups that are not
// inside a node (tp must divide the GPUs per node), ZeRO++ and MiCS (their groups are built over
// the world, not the data-parallel group, in zplan's model), and the model's own checks.
void check_tensor_parallel(const models::Model& model, const DsConfig& config,
                           const Workload& workload, const hardware::Cluster& cluster,
                           const std::string& where);

// The AutoTP all-reduces of one micro-step on one rank, each over the tensor-parallel group.
// Forward: one per row-split linear (LinearAllreduce: RowParallel.forward all-reduces its
// [T x out] output); backward: one per column-split linear (LinearLayer: ColumnParallel.backward
// all-reduces its [T x in] input gradient) of every layer that has a backward. Recompute under
// activation checkpointing adds the forward ones again for the checkpointed layers.
struct TensorParallelTraffic {
  int forward_count = 0;
  double forward_bytes = 0;  // nccl-tests' S: the tensor each rank holds, summed
  int backward_count = 0;
  double backward_bytes = 0;
  int recompute_count = 0;
  double recompute_bytes = 0;
};
// `model` is the shard (Model::tensor_parallel() == workload.tensor_parallel); zero traffic at
// tensor_parallel 1.
TensorParallelTraffic tensor_parallel_traffic(const models::Model& model, const DsConfig& config,
                                              const Workload& workload,
                                              const std::vector<bool>& checkpointed);

// Adds the all-reduces to the pieces that run the linears, priced with group_collective_cost in
// the tensor-parallel group: forward time for the row-split ones, backward time for the
// column-split ones -- with tp_overlap_comm only what outlasts the layer's weight-gradient GEMM
// (AsyncColumnParallel.backward starts the all-reduce, computes grad_weight, then waits). No-op
// at tensor_parallel 1.
void add_tensor_parallel_all_reduces(std::vector<Piece>& pieces, const models::Model& model,
                                     const hardware::Cluster& cluster, const DsConfig& config,
                                     const Workload& workload);

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_TENSOR_PARALLEL_H_
