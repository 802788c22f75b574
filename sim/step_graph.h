// StepGraph: one micro-step (or the optimizer step) of one representative rank, as a DAG of
// tasks on resources, with the memory each task allocates and frees.
//
// The builder (sim/step_builder.h) writes it; two interpreters read it: the discrete-event engine
// (sim/engine.h) on a simulated clock, and the reference executor (calibrate/) on real hardware.
//
// Semantics every interpreter follows:
//  * A resource is a CUDA stream, a copy engine, the CPU optimizer threads or an NVMe queue. It
//    runs one task at a time, in the order the builder added them to it (program order, as a
//    CUDA stream does), and a task starts only when every task it depends on has ended.
//  * A task takes latency_s, then work_s at the full rate of its shared link. Tasks on the same
//    link at the same time share its bandwidth equally (processor sharing); a task with no link
//    simply lasts latency_s + work_s.
//  * Compute-stream tasks slow down by comm_compute_slowdown while any collective runs on another
//    stream.
//  * Memory effects apply when the task starts (at_end == false) or ends (at_end == true).
//    `baseline` holds what exists before the first task (model states, carried gradients).
// The edges live in a Boost.Graph compressed-sparse-row graph (the DAG), built by finalize().
#ifndef ZPLAN_SIM_STEP_GRAPH_H_
#define ZPLAN_SIM_STEP_GRAPH_H_

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <boost/graph/compressed_sparse_row_graph.hpp>

#include "sim/fingerprint.h"
#include "sim/memory_breakdown.h"

namespace zplan::sim {

enum class Resource : uint8_t {
  kCompute,       // the default CUDA stream: forward, backward, recompute, GPU optimizer
  kGatherStream,  // stage 3's all-gather stream (with overlap_comm)
  kReduceStream,  // reduction stream (stages 1-2) / reduce-scatter stream (stage 3), overlap_comm
  kH2D,           // host-to-device copy engine
  kD2H,           // device-to-host copy engine
  kCpuOptimizer,  // CPU Adam threads of this rank
  kNvmeRead,
  kNvmeWrite,
};
inline constexpr int kNumResources = 8;
const char* resource_name(Resource r);  // "compute", "all-gather stream", ...

enum class TaskKind : uint8_t {
  kForward,
  kBackward,
  kRecompute,
  kAllGather,
  kReduceScatter,
  kAllReduce,
  kReduce,
  kBucketCopy,  // flatten / interleave copies into a collective's input buffer
  kGradAccumulate,
  kH2D,
  kD2H,
  kOptimizerGpu,
  kOptimizerCpu,
  kNvmeRead,
  kNvmeWrite,
};
inline constexpr int kNumTaskKinds = 15;
const char* task_kind_name(TaskKind k);  // "forward", "all_gather", ...
bool is_collective(TaskKind k);

// Where a transfer's bandwidth phase runs; PCIe is full duplex, so each direction is its own link.
enum class LinkSlot : uint8_t { kNone, kIntraNode, kNetwork, kPcieH2D, kPcieD2H, kNvme };
inline constexpr int kNumLinkSlots = 6;

// The communicator a collective runs in: every rank, or one of ZeRO++'s and MiCS's groups
// (sim/zeropp_mics.h ZeroGroups says which ranks each holds). Only the executor reads it -- the
// simulator prices a group's collective into latency_s and work_s -- so it is not part of the
// fingerprint.
enum class CommGroupId : uint8_t {
  kWorld,
  kPartition,   // the states' partition group: every rank, or the MiCS shard
  kSecondary,   // hpZ's secondary partition group
  kReplica,     // MiCS: the ranks with the same index in every shard
  kShardInter,  // MiCS hierarchical gather: the shard's ranks of one local index
  kShardIntra,  // MiCS hierarchical gather: the shard's ranks on one node
  kNode,        // qgZ: the node's ranks
  kAcrossNodes  // qgZ: the ranks of one local index on every node
};
inline constexpr int kNumCommGroups = 8;

struct MemEffect {
  bool at_end = false;
  Tier tier = Tier::kGpu;
  Category category = Category::kActivations;
  double bytes = 0;  // > 0 allocates, < 0 frees
};

struct Task {
  TaskKind kind = TaskKind::kForward;
  Resource resource = Resource::kCompute;
  LinkSlot link = LinkSlot::kNone;
  CommGroupId group = CommGroupId::kWorld;  // a collective's communicator
  int16_t micro_step = 0;  // -1: the optimizer step
  int32_t layer = -1;
  int32_t index = -1;     // module, bucket or sub-group number, for names
  double latency_s = 0;   // fixed part
  double work_s = 0;      // bandwidth part at the full link rate (or the rest of the duration)
  double bytes = 0;       // collective size (nccl-tests' S) or bytes copied
  double wire_bytes = 0;  // bytes this rank sends for a collective (volume accounting)
  double flops = 0;
  // Of a compute-stream task's work_s, the time its GPU waited for the host thread that issues
  // its kernels (Piece::fwd_host_s): the critical path counts it as host Python, not compute.
  double host_s = 0;
  uint32_t effects_begin = 0;
  uint32_t effects_count = 0;
  // Set by StepGraph::finalize for the interpreters: what kind of work this is for the engine.
  bool slowed_by_comm = false;  // a compute-stream kernel (comm_compute_slowdown applies)
  bool slows_compute = false;   // a collective on a communication stream
};

using TaskId = uint32_t;

// Tasks [begin, end) repeat with `period`: for begin <= i < end - period, task i + period is a
// copy of task i (sim/periodic.h says what that means). Found by finalize(); the engine simulates
// such a stretch until it reaches a steady state and then jumps over the repeats.
struct PeriodicRegion {
  TaskId begin = 0;
  TaskId end = 0;
  uint32_t period = 0;
  std::array<uint32_t, kNumResources> per_period{};  // tasks of each resource in one period
  // Every effect in the region is a multiple of 2^-kMemoryQuantumBits bytes (sim/periodic.h).
  bool exact_memory = false;
  double effect_bytes_per_period = 0;  // sum of |bytes| of one period's effects
};

using DagGraph = boost::compressed_sparse_row_graph<boost::directedS>;

class StepGraph {
 public:
  // Adds a task at the end of its resource's program order; returns its id.
  TaskId add(const Task& task);
  // The task `id` starts only after `before` ends. REQUIRES: before < id (tasks are added in a
  // topological order, which also rules out cycles).
  void depend(TaskId id, TaskId before);
  // A memory effect of task `id` (any task, in any order; finalize() groups them by task).
  void effect(TaskId id, bool at_end, Tier tier, Category category, double bytes);
  // A hint that a repeating unit (a layer's forward, its backward) starts with the next task.
  // finalize() looks for periodic regions around the hints and checks every one it keeps, so a
  // wrong hint costs only time.
  void hint_repeat() { hints_.push_back(static_cast<TaskId>(tasks_.size())); }

  // Builds the Boost.Graph DAG and the per-resource orders. Call once, after the last add().
  // Throws InputError when the tasks' durations add up to more than kMaxGraphSeconds (sim/time.h):
  // a step the clock cannot hold comes from absurd inputs (a sequence of 2^31 tokens).
  void finalize();
  bool finalized() const { return finalized_; }
  // A 128-bit hash of everything the simulation of this graph depends on: every task's kind,
  // resource, link, latency, work and wire bytes, every effect and dependency, in the order they
  // were added, the baseline and comm_compute_slowdown (not the tasks' names, bytes or FLOPs,
  // which only traces and the executor read). Two graphs with the same fingerprint simulate the
  // same; the planner reuses one's outcome for the other (two different graphs collide with
  // probability ~2^-128 per pair).
  // REQUIRES: !finalized() (finalize() reorders what it hashes).
  GraphFingerprint fingerprint() const;
  // Empties the graph, keeping its buffers' capacity for the next build.
  void clear();
  // Pre-sizes the buffers for about `tasks` tasks.
  void reserve(size_t tasks);

  const std::vector<Task>& tasks() const { return tasks_; }
  const std::vector<MemEffect>& effects() const { return effects_; }
  const DagGraph& dag() const { return dag_; }
  // Task ids of each resource in program order.
  const std::array<std::vector<TaskId>, kNumResources>& resource_order() const { return order_; }
  size_t edge_count() const { return edges_.size(); }
  // Number of dependencies of each task (in-degree of the DAG).
  const std::vector<uint32_t>& in_degree() const { return in_degree_; }
  // Disjoint repeating stretches of tasks, sorted by begin (set by finalize()).
  const std::vector<PeriodicRegion>& periodic_regions() const { return periods_; }
  const std::vector<TaskId>& repeat_hints() const { return hints_; }

  std::array<MemoryBreakdown, kNumTiers> baseline{};
  // While a collective runs on another stream, compute tasks progress at (1 - this) of their
  // rate (GpuSpec::comm_compute_slowdown): NCCL's kernels take SMs and HBM bandwidth.
  double comm_compute_slowdown = 0;

 private:
  std::vector<Task> tasks_;
  std::vector<MemEffect> effects_;
  std::vector<TaskId> effect_owner_;  // until finalize() sorts effects_ by task
  std::vector<MemEffect> scratch_effects_;
  std::vector<uint32_t> scratch_offsets_;
  std::vector<std::pair<TaskId, TaskId>> edges_;  // (before, after)
  std::vector<std::pair<TaskId, TaskId>> scratch_edges_;
  std::vector<uint32_t> in_degree_;
  std::array<std::vector<TaskId>, kNumResources> order_;
  DagGraph dag_;
  std::vector<TaskId> hints_;
  std::vector<PeriodicRegion> periods_;
  bool finalized_ = false;
};

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_STEP_GRAPH_H_
