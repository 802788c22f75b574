// What the plan says would fit when nothing it searched does; plan.cc's part that is not about
// ranking (docs/planner.md, "When nothing fits").
#ifndef ZPLAN_PLANNER_WHAT_WOULD_FIT_H_
#define ZPLAN_PLANNER_WHAT_WOULD_FIT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "planner/plan.h"

namespace zplan::planner {

// Lines saying what would fit: on these GPUs with the lists widened, on more GPUs (keeping the
// stage and offload lists), with a shorter sequence, and why no count of GPUs helps. `closest`
// indexes the nearest miss in `search`.
std::vector<std::string> what_would_fit(const Problem& problem, const SearchResult& search,
                                        size_t closest);

// "16 GPUs (2 nodes of 8): ZeRO-3, micro-batch 1, checkpointing (GPU peak 36.1 GiB of 40.0 GiB)";
// with more GPUs than the planned global batch has samples, also the batch that count implies
// ("; one sample a GPU is a global batch of 1992, not 256").
std::string gpu_count_words(const Problem& problem, const GpuCount& count,
                            int64_t global_batch);

}  // namespace zplan::planner

#endif  // ZPLAN_PLANNER_WHAT_WOULD_FIT_H_
