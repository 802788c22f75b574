// Pieces shared by the step builder's files (step_builder.cc, step_builder_stage3.cc).
#ifndef ZPLAN_SIM_STEP_BUILDER_INTERNAL_H_
#define ZPLAN_SIM_STEP_BUILDER_INTERNAL_H_

#include <limits>
#include <vector>

#include "hardware/cost_model.h"
#include "sim/step_builder.h"

namespace zplan::sim {

inline constexpr TaskId kNoTaskId = std::numeric_limits<TaskId>::max();

// HBM bytes per parameter of the optimizer step on the GPU: the update's reads and writes
// (OptimizerConfig::gpu_step_bytes; fused Adam: read fp32 param, grad, m, v (16), write param, m, v
// (12); torch's foreach Adam a pass per operation), then the 16-bit copy written (p). [est: the
// kernels are bandwidth bound]
inline double gpu_optimizer_bytes(const OptimizerConfig& optimizer, double param_bytes) {
  return optimizer.gpu_step_bytes() + param_bytes;
}

// The state of one StepBuilder::build() call.
struct StepBuilder::Ctx {
  StepGraph* g = nullptr;
  int ms = 0;
  bool first = false;
  bool boundary = false;
  TaskId last_compute = kNoTaskId;
  TaskId last_reduction = kNoTaskId;        // the micro-step's last gradient reduction
  std::vector<TaskId> bucket_reduced;       // reduction task of each bucket, by bucket index
  std::vector<TaskId> ckpt_on_host;         // per layer: the copy of its checkpoint to the host
  int repeat_key = -1;                      // layer and kind of the last compute task added
};

// A gradient bucket being filled or just closed.
struct PendingBucket {
  int index = 0;
  double elems = 0;
  TaskId first_filler = kNoTaskId;  // the backward task that put its first gradient in
  TaskId closer = kNoTaskId;        // the task whose gradient overflowed it (it is reduced then)
  int tensors = 0;                  // gradients (parameter tensors) in it
  // Of those, the vectors (biases, norm weights: at most the Bucketer's vector_limit elements)
  // and their elements: qgZ reduce-scatters them one by one instead of its all-to-all.
  int vectors = 0;
  double vector_elems = 0;
};

// Fills reduce_bucket_size buckets with gradients in the order backward produces them, as the
// gradient hooks do: a bucket is reduced when the next gradient would overflow it; a gradient
// larger than a whole bucket is reduced on its own (DeepSpeed's "extra large param",
// reference/deepspeed_internals.md §2.1 item 4).
class Bucketer {
 public:
  explicit Bucketer(double capacity, double vector_limit = 0)
      : capacity_(capacity), vector_limit_(vector_limit) {}

  template <typename OnFull>
  void add(double elems, TaskId producer, OnFull on_full) {
    if (elems <= 0) return;
    if (cur_.elems > 0 && cur_.elems + elems > capacity_) close(producer, on_full);
    if (elems > capacity_) {
      PendingBucket big{next_index_++, elems, producer, producer};
      count(big, elems);
      started_.push_back(big);
      on_full(big);
      return;
    }
    if (cur_.elems == 0) {
      cur_.index = next_index_++;
      cur_.first_filler = producer;
      started_.push_back(cur_);
    }
    cur_.elems += elems;
    count(cur_, elems);
    last_producer_ = producer;
  }

  // The partly filled bucket, reduced in the backward epilogue.
  template <typename OnFull>
  void flush(OnFull on_full) {
    if (cur_.elems > 0) close(last_producer_, on_full);
  }

  // Buckets that received their first gradient since the last call.
  std::vector<PendingBucket> take_started() {
    std::vector<PendingBucket> out;
    out.swap(started_);
    return out;
  }

 private:
  template <typename OnFull>
  void close(TaskId closer, OnFull on_full) {
    cur_.closer = closer;
    PendingBucket full = cur_;
    cur_ = PendingBucket();
    on_full(full);
  }

  void count(PendingBucket& b, double elems) const {
    ++b.tensors;
    if (elems <= vector_limit_) {
      ++b.vectors;
      b.vector_elems += elems;
    }
  }

  double capacity_;
  double vector_limit_;
  PendingBucket cur_;
  int next_index_ = 0;
  TaskId last_producer_ = kNoTaskId;
  std::vector<PendingBucket> started_;
};

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_STEP_BUILDER_INTERNAL_H_
