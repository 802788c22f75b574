// Comm over NCCL (built with ZPLAN_HAVE_NCCL), for the CUDA executor device: one communicator and
// one stream per data channel, so that the compute, gather and reduce streams run collectives at
// the same time as DeepSpeed's streams do; the control traffic (barriers, timings, the
// communicators' unique ids) stays on the control communicator (MPI), and so does any collective
// on the host channel, whose buffers are host memory. Every
// collective is waited for before the call returns; one that makes no progress for
// timeout_s aborts its communicator and the job with a line naming the rank, the channel and the
// operation (NCCL itself never times out).
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "kernels/check.h"
#include "kernels/comm_nccl.h"

namespace zplan::kernels {

namespace {

class NcclComm : public ControlledComm {
 public:
  NcclComm(Comm* control, int gpu, int host_channel, double timeout_s)
      : ControlledComm(control), gpu_(gpu), host_channel_(host_channel), timeout_s_(timeout_s) {
    ZPLAN_CUDA_CHECK(cudaSetDevice(gpu_));
    const int channels = control_->channels();
    comms_.assign(static_cast<size_t>(channels), nullptr);
    streams_.assign(static_cast<size_t>(channels), nullptr);
    // One communicator per data channel, all ranks creating them in the same order; rank 0's
    // ncclUniqueId reaches the others through the control channel, one byte per double.
    for (int c = 0; c < channels; ++c) {
      if (c == host_channel_) continue;
      ncclUniqueId id;
      std::memset(&id, 0, sizeof id);
      if (control_->rank() == 0) ZPLAN_NCCL_CHECK(ncclGetUniqueId(&id));
      std::vector<double> mine(sizeof id, 0.0);
      const auto* bytes = reinterpret_cast<const unsigned char*>(&id);
      for (size_t i = 0; i < sizeof id; ++i) mine[i] = bytes[i];
      std::vector<double> all = control_->gather_all(host_channel_, mine);
      auto* out = reinterpret_cast<unsigned char*>(&id);
      for (size_t i = 0; i < sizeof id; ++i) out[i] = static_cast<unsigned char>(all[i]);
      ZPLAN_NCCL_CHECK(ncclCommInitRank(&comms_[static_cast<size_t>(c)], control_->size(), id,
                                        control_->rank()));
      ZPLAN_CUDA_CHECK(
          cudaStreamCreateWithFlags(&streams_[static_cast<size_t>(c)], cudaStreamNonBlocking));
    }
    int version = 0;
    ncclGetVersion(&version);
    name_ = "nccl " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) +
            "." + std::to_string(version % 100);
  }

  ~NcclComm() override {
    for (size_t c = 0; c < comms_.size(); ++c) {
      if (comms_[c] != nullptr) ncclCommDestroy(comms_[c]);
      if (streams_[c] != nullptr) cudaStreamDestroy(streams_[c]);
    }
  }

  std::string name() const override { return name_; }

  // Not made: ncclCommSplit of every channel's communicator plus a split control communicator
  // would do it; until then ZeRO++ hpZ and MiCS run on CPU ranks only.
  std::unique_ptr<Comm> split(int) override {
    throw_unavailable("cuda", "NCCL sub-communicators (hpZ and MiCS groups) are not implemented");
  }

  // The host channel carries host data (final weights, say) through the control communicator.
  void all_reduce(int channel, float* data, size_t count) override {
    if (channel == host_channel_) return control_->all_reduce(channel, data, count);
    set_device();
    ZPLAN_NCCL_CHECK(
        ncclAllReduce(data, data, count, ncclFloat, ncclSum, comm(channel), stream(channel)));
    wait(channel, "all_reduce");
  }

  void all_gather(int channel, const float* send, size_t count, float* recv) override {
    if (channel == host_channel_) return control_->all_gather(channel, send, count, recv);
    set_device();
    ZPLAN_NCCL_CHECK(ncclAllGather(send, recv, count, ncclFloat, comm(channel), stream(channel)));
    wait(channel, "all_gather");
  }

  void reduce_scatter(int channel, float* data, size_t count) override {
    if (channel == host_channel_) return control_->reduce_scatter(channel, data, count);
    set_device();
    // NCCL's in-place form leaves this rank's sum at its own block; the interface wants it first.
    float* mine = data + static_cast<size_t>(rank()) * count;
    ZPLAN_NCCL_CHECK(
        ncclReduceScatter(data, mine, count, ncclFloat, ncclSum, comm(channel), stream(channel)));
    if (mine != data) {
      ZPLAN_CUDA_CHECK(
          cudaMemcpyAsync(data, mine, count * sizeof(float), cudaMemcpyDefault, stream(channel)));
    }
    wait(channel, "reduce_scatter");
  }

 private:
  void set_device() { ZPLAN_CUDA_CHECK(cudaSetDevice(gpu_)); }

  ncclComm_t comm(int channel) const {
    if (channel < 0 || channel >= static_cast<int>(comms_.size()) ||
        comms_[static_cast<size_t>(channel)] == nullptr) {
      throw BackendError("executor",
                                  "no NCCL communicator for channel " + std::to_string(channel));
    }
    return comms_[static_cast<size_t>(channel)];
  }
  cudaStream_t stream(int channel) const { return streams_[static_cast<size_t>(channel)]; }

  // Polls the channel's stream until the collective is done, checking NCCL's asynchronous errors.
  void wait(int channel, const char* op) {
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      cudaError_t q = cudaStreamQuery(stream(channel));
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) ZPLAN_CUDA_CHECK(q);
      ncclResult_t async = ncclSuccess;
      ZPLAN_NCCL_CHECK(ncclCommGetAsyncError(comm(channel), &async));
      if (async != ncclSuccess && async != ncclInProgress) ZPLAN_NCCL_CHECK(async);
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > timeout_s_) {
        ncclCommAbort(comms_[static_cast<size_t>(channel)]);
        comms_[static_cast<size_t>(channel)] = nullptr;
        control_->abort("rank " + std::to_string(rank()) + ": " + op + " on channel " +
                        std::to_string(channel) + " made no progress for " +
                        std::to_string(static_cast<int>(timeout_s_)) +
                        " s (another rank stopped?)");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  int gpu_;
  int host_channel_;
  double timeout_s_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  std::string name_;
};

}  // namespace

std::unique_ptr<Comm> make_nccl_comm(Comm* control, int gpu, int host_channel, double timeout_s) {
  return std::make_unique<NcclComm>(control, gpu, host_channel, timeout_s);
}

bool comm_has_nccl() { return true; }

}  // namespace zplan::kernels
