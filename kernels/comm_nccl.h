// Comm over NCCL, for ranks whose data live on GPUs (the CUDA executor device): the data
// collectives on NCCL communicators, the control traffic forwarded to a host Comm (MPI ranks, or
// threads). kernels/comm_nccl.cc is built with ZPLAN_HAVE_NCCL; without it make_nccl_comm throws.
#ifndef ZPLAN_KERNELS_COMM_NCCL_H_
#define ZPLAN_KERNELS_COMM_NCCL_H_

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kernels/comm.h"

namespace zplan::kernels {

// A communicator whose rank, size, hosts and control traffic (barriers, timings, broadcasts,
// aborts) are those of another, `control` (kept, not owned); subclasses move the data.
class ControlledComm : public Comm {
 public:
  explicit ControlledComm(Comm* control) : control_(control) {}
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
  Comm* control_;
};

// The collectives of ranks on GPU `gpu` (already the current device of the calling thread): NCCL,
// one communicator and one stream per channel except `host_channel`, bootstrapped and controlled
// through `control` (kept, not owned), whose control traffic it forwards; collectives on
// host_channel (host buffers) go to `control` too. A collective that makes no progress for
// timeout_s aborts the job. Throws BackendError without NCCL in the build.
std::unique_ptr<Comm> make_nccl_comm(Comm* control, int gpu, int host_channel, double timeout_s);

// True iff this build has NCCL.
bool comm_has_nccl();

}  // namespace zplan::kernels

#endif  // ZPLAN_KERNELS_COMM_NCCL_H_
