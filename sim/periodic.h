// Finding the periodic regions of a step graph: runs of tasks that repeat, layer after layer,
// with the same costs, memory effects and dependency pattern (StepGraph::periodic_regions). The
// engine simulates such a run until its state repeats and then jumps over the repeats
// (sim/engine.h); the result is exactly what simulating every task gives, so the regions only
// have to be right, never complete.
//
// "Task j is a copy of task i" (j = i + P) means: the same kind, resource, link, latency, work,
// wire bytes and engine flags, the same memory effects in the same order, the same number of
// dependencies, and the same dependents shifted by P. Every resource's program order is its tasks
// in id order, so within a region the resource orders repeat too.
#ifndef ZPLAN_SIM_PERIODIC_H_
#define ZPLAN_SIM_PERIODIC_H_

#include <vector>

#include "sim/step_graph.h"

namespace zplan::sim {

// Memory amounts the engine extrapolates over skipped periods must be sums that double computes
// exactly: multiples of 2^-kMemoryQuantumBits bytes below 2^kMemoryExactBits in magnitude.
inline constexpr int kMemoryQuantumBits = 10;
inline constexpr int kMemoryExactBits = 52 - kMemoryQuantumBits;
bool exact_memory_value(double v);

// Replaces *regions with disjoint periodic regions of a finalized graph, each at least three
// periods long, sorted by begin. Candidate periods come from the builder's hints
// (StepGraph::hint_repeat): stretches where the distances between hints repeat. Every task of a
// region returned has been checked to be a copy, so a wrong hint can only cost a region.
void find_periodic_regions(const StepGraph& graph, std::vector<PeriodicRegion>* regions);

// True if task j is a copy of task i shifted by j - i (j > i).
bool is_shifted_copy(const StepGraph& graph, TaskId i, TaskId j);

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_PERIODIC_H_
