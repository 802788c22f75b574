// ExecutorLayout: where every parameter, gradient and optimizer element of a model lives on one
// rank under a ZeRO configuration -- the same numbers the step builder derives (sim::ZeroSizes),
// expanded to single tensors so that the executor can move real data:
//
//  * stages 0-2: one flat buffer of all parameters in model order, padded to a multiple of
//    2 x dp (nccl_start_alignment_factor); rank r owns the contiguous partition [r P, (r+1) P)
//    (reference/deepspeed_internals.md §2.1 item 1);
//  * stage 3: every tensor split into dp pieces of ceil(numel / dp) elements (zero-padded); a rank's
//    partition is its piece of every tensor, in model order; optimizer sub-groups are runs of
//    whole tensors of at least sub_group_size partition elements; tensors of at most
//    stage3_param_persistence_threshold elements are persistent (§2.2 items 1, 2, 9);
//  * gradient buckets: the gradients in the order backward produces them (the pieces of the step
//    graph, last to first), filled by the builder's own Bucketer, so that bucket k here is bucket
//    k of the graph.
// It is checked against ZeroSizes on construction: a disagreement is a bug and asserts.
#ifndef ZPLAN_EXECUTOR_LAYOUT_H_
#define ZPLAN_EXECUTOR_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "models/model.h"
#include "sim/step_builder.h"
#include "sim/zero_config.h"

namespace zplan::executor {

struct ParamSlot {
  std::string name;
  int layer = 0;
  int module = 0;
  int64_t numel = 0;
  int64_t flat_offset = 0;  // stages 0-2: offset in the flat parameter buffer
  int64_t part_numel = 0;   // stage 3: ceil(numel / dp), this rank's piece (with padding)
  int64_t part_offset = 0;  // stage 3: offset of its piece in the rank's partition
  bool persistent = false;  // stage 3
  int sub_group = 0;        // stage 3
  int bucket = -1;          // the gradient bucket it belongs to (stages 1-3)
  int64_t bucket_offset = 0;  // its gradient's offset in that bucket (full elements)
};

struct BucketSlots {
  std::vector<int> params;  // in the order their gradients arrive
  int64_t elems = 0;        // full gradient elements
  int64_t part_elems = 0;   // stage 3: sum of the params' part_numel
};

struct SubGroupSlots {
  int first_param = 0;  // params [first_param, end_param) in model order
  int end_param = 0;
  int64_t begin = 0;    // partition elements [begin, begin + size)
  int64_t size = 0;
};

class ExecutorLayout {
 public:
  // REQUIRES: builder was made for (model, config) with dp ranks.
  ExecutorLayout(const models::Model& model, const sim::DsConfig& config,
                 const sim::StepBuilder& builder, int dp, int rank);

  int dp() const { return dp_; }
  int rank() const { return rank_; }
  int stage() const { return stage_; }
  const std::vector<ParamSlot>& params() const { return params_; }
  // Parameter ids of module `module` of layer `layer`; a tied module lists its owner's ids.
  const std::vector<int>& module_params(int layer, int module) const {
    return module_params_[static_cast<size_t>(layer)][static_cast<size_t>(module)];
  }
  // Parameter ids whose gradients piece `piece`'s backward produces, in the order they appear.
  const std::vector<int>& piece_grads(int piece) const {
    return piece_grads_[static_cast<size_t>(piece)];
  }
  const std::vector<BucketSlots>& buckets() const { return buckets_; }
  const std::vector<SubGroupSlots>& sub_groups() const { return sub_groups_; }

  int64_t psi() const { return psi_; }
  // Stages 0-2: elements of the padded flat buffer (dp x partition; psi for stage 0).
  int64_t flat_size() const { return flat_size_; }
  // This rank's partition in elements (stage 0: psi).
  int64_t partition() const { return partition_; }
  // Stages 1-2: this rank's range of the flat buffer.
  int64_t partition_begin() const { return partition_ * rank_; }
  int64_t persistent_elems() const { return persistent_; }
  int64_t largest_param() const { return largest_param_; }

 private:
  int dp_;
  int rank_;
  int stage_;
  std::vector<ParamSlot> params_;
  std::vector<std::vector<std::vector<int>>> module_params_;
  std::vector<std::vector<int>> piece_grads_;
  std::vector<BucketSlots> buckets_;
  std::vector<SubGroupSlots> sub_groups_;
  int64_t psi_ = 0;
  int64_t flat_size_ = 0;
  int64_t partition_ = 0;
  int64_t persistent_ = 0;
  int64_t largest_param_ = 0;
};

}  // namespace zplan::executor

#endif  // ZPLAN_EXECUTOR_LAYOUT_H_
