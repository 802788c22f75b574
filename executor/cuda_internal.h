// Pieces of the CUDA executor device shared by its files (built with ZPLAN_HAVE_CUDA_EXECUTOR).
#ifndef ZPLAN_EXECUTOR_CUDA_INTERNAL_H_
#define ZPLAN_EXECUTOR_CUDA_INTERNAL_H_

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kernels/comm.h"

namespace zplan::executor::internal {

// The GPU communicators' common part: rank, size and the control traffic (barriers, timings,
// aborts) go to the control communicator, `control` (kept, not owned).
class ControlledComm : public kernels::Comm {
 public:
  explicit ControlledComm(kernels::Comm* control) : control_(control) {}
  int rank() const override { return control_->rank(); }
  int size() const override { return control_->size(); }
  int local_rank() const override { return control_->local_rank(); }
  int local_size() const override { return control_->local_size(); }
  const std::vector<std::string>& hosts() const override { return control_->hosts(); }
  std::string library() const override { return control_->library(); }
  int channels() const override { return control_->channels(); }
  void barrier(int channel) override { control_->barrier(channel); }
  void max(int channel, std::vector<double>* values) override { control_->max(channel, values); }
  void sum(int channel, std::vector<double>* values) override { control_->sum(channel, values); }
  std::vector<double> gather_all(int channel, const std::vector<double>& values) override {
    return control_->gather_all(channel, values);
  }
  void broadcast(int channel, void* data, size_t bytes, int root) override {
    control_->broadcast(channel, data, bytes, root);
  }
  [[noreturn]] void abort(const std::string& message) override {
    control_->abort(message);
    std::abort();  // not reached: control_->abort does not return
  }

 protected:
  kernels::Comm* control_;
};

// The collectives of the CUDA device on GPU `gpu` (already the current device of the calling
// thread): NCCL, one communicator per data channel, bootstrapped and controlled through `control`
// (kept, not owned), whose barrier/max/sum/gather_all/abort it forwards. A collective that makes
// no progress for timeout_s aborts the job. Throws BackendError without NCCL in the build.
std::unique_ptr<kernels::Comm> make_nccl_comm(kernels::Comm* control, int gpu, double timeout_s);

}  // namespace zplan::executor::internal

#endif  // ZPLAN_EXECUTOR_CUDA_INTERNAL_H_
