// The nccl backend (built with ZPLAN_HAVE_NCCL): all_gather, reduce_scatter and all_reduce among
// GPUs, timed by the shared nccl-tests-style sweep (collective_sweep.h).
//
// Two ways to form the communicator, as nccl-tests offers:
// * under mpirun (more than one rank): one GPU per rank (the rank's index on its node), rank 0's
//   ncclUniqueId broadcast to the others over MPI, ncclCommInitRank;
// * a single process: all the GPUs it sees, with ncclCommInitAll, driven from one thread inside
//   ncclGroupStart/End (nccl-tests -g N).
// A timed block is a host timer around `iters` back-to-back launches on every GPU of the process,
// then a synchronize of their streams (nccl-tests BenchTime, reference §2.2).
#include <chrono>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "calibrate/backend.h"
#include "calibrate/collective_sweep.h"
#include "kernels/check.h"
#include "kernels/cuda_info.h"

namespace zplan::calibrate {

namespace {

class NcclCollectiveBench : public CollectiveBench {
 public:
  NcclCollectiveBench(kernels::Comm& group, int visible) : nodes_(group.nodes()) {
    if (group.size() > 1) {
      ranks_ = group.size();
      first_rank_ = group.rank();
      devices_ = {group.local_rank() % visible};
      ncclUniqueId id;
      if (group.rank() == 0) ZPLAN_NCCL_CHECK(ncclGetUniqueId(&id));
      group.broadcast(&id, sizeof id, 0);
      ZPLAN_CUDA_CHECK(cudaSetDevice(devices_[0]));
      comms_.resize(1);
      ZPLAN_NCCL_CHECK(ncclCommInitRank(&comms_[0], ranks_, id, group.rank()));
    } else {
      ranks_ = visible;
      for (int d = 0; d < visible; ++d) devices_.push_back(d);
      comms_.resize(visible);
      ZPLAN_NCCL_CHECK(ncclCommInitAll(comms_.data(), visible, devices_.data()));
    }
    streams_.resize(devices_.size());
    send_.assign(devices_.size(), nullptr);
    recv_.assign(devices_.size(), nullptr);
    for (size_t i = 0; i < devices_.size(); ++i) {
      ZPLAN_CUDA_CHECK(cudaSetDevice(devices_[i]));
      ZPLAN_CUDA_CHECK(cudaStreamCreateWithFlags(&streams_[i], cudaStreamNonBlocking));
    }
  }

  ~NcclCollectiveBench() override {
    for (size_t i = 0; i < devices_.size(); ++i) {
      cudaSetDevice(devices_[i]);
      if (send_[i] != nullptr) cudaFree(send_[i]);
      if (recv_[i] != nullptr) cudaFree(recv_[i]);
      cudaStreamDestroy(streams_[i]);
      ncclCommDestroy(comms_[i]);
    }
  }

  int ranks() const override { return ranks_; }
  int nodes() const override { return nodes_; }
  std::string backend() const override { return "nccl"; }

  // The communicator rank of this process's i-th device.
  int rank_of(size_t i) const { return first_rank_ + static_cast<int>(i); }

  void reserve(double max_bytes) override {
    // Every op's send and receive buffers fit in S bytes (nccl-tests' sizes, §2.1).
    const size_t bytes = static_cast<size_t>(max_bytes) + 4 * size_t(ranks_);
    if (bytes <= reserved_) return;
    for (size_t i = 0; i < devices_.size(); ++i) {
      ZPLAN_CUDA_CHECK(cudaSetDevice(devices_[i]));
      if (send_[i] != nullptr) ZPLAN_CUDA_CHECK(cudaFree(send_[i]));
      if (recv_[i] != nullptr) ZPLAN_CUDA_CHECK(cudaFree(recv_[i]));
      ZPLAN_CUDA_CHECK(cudaMalloc(&send_[i], bytes));
      ZPLAN_CUDA_CHECK(cudaMalloc(&recv_[i], bytes));
      ZPLAN_CUDA_CHECK(cudaMemset(send_[i], 0, bytes));
    }
    reserved_ = bytes;
  }

  double run(hardware::Collective op, int64_t count, int iters, bool in_place) override {
    const size_t c = static_cast<size_t>(count);
    auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < iters; ++it) {
      ZPLAN_NCCL_CHECK(ncclGroupStart());
      for (size_t i = 0; i < devices_.size(); ++i) {
        // In place as nccl-tests sets it up (getCollByteCount's in-place offsets): all_gather
        // sends from this rank's slot of the output, reduce_scatter receives into this rank's
        // slot of the input, all_reduce uses one buffer.
        const size_t slot = size_t(rank_of(i)) * c * sizeof(float);
        char* recv = static_cast<char*>(recv_[i]);
        switch (op) {
          case hardware::Collective::kAllGather:
            ZPLAN_NCCL_CHECK(ncclAllGather(in_place ? recv + slot : send_[i], recv, c, ncclFloat,
                                           comms_[i], streams_[i]));
            break;
          case hardware::Collective::kReduceScatter:
            ZPLAN_NCCL_CHECK(ncclReduceScatter(in_place ? recv : send_[i],
                                               in_place ? recv + slot : recv, c, ncclFloat, ncclSum,
                                               comms_[i], streams_[i]));
            break;
          case hardware::Collective::kAllReduce:
            ZPLAN_NCCL_CHECK(ncclAllReduce(in_place ? recv : send_[i], recv, c, ncclFloat, ncclSum,
                                           comms_[i], streams_[i]));
            break;
        }
      }
      ZPLAN_NCCL_CHECK(ncclGroupEnd());
    }
    for (size_t i = 0; i < devices_.size(); ++i) {
      ZPLAN_CUDA_CHECK(cudaSetDevice(devices_[i]));
      ZPLAN_CUDA_CHECK(cudaStreamSynchronize(streams_[i]));
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  int ranks_ = 0;
  int nodes_ = 1;
  int first_rank_ = 0;
  std::vector<int> devices_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  std::vector<void*> send_;
  std::vector<void*> recv_;
  size_t reserved_ = 0;
};

class NcclBackend : public Backend {
 public:
  std::string name() const override { return "nccl"; }

  void check(kernels::Comm& group, const ProbeOptions&) override {
    int visible = kernels::visible_cuda_devices("nccl");
    if (group.size() == 1 && visible < 2) {
      kernels::throw_unavailable("nccl",
                                 "needs at least 2 GPUs: this process sees 1 and is the only rank "
                                 "(use a node with several GPUs, or mpirun -np N across nodes)");
    }
    if (group.size() > 1 && group.local_size() > visible) {
      kernels::throw_unavailable(
          "nccl", std::to_string(group.local_size()) + " ranks on one node but only " +
                      std::to_string(visible) + " CUDA devices (one rank per GPU)");
    }
  }

  void measure(kernels::Comm& group, const ProbeOptions& options, Progress& progress,
               Measurements* out) override {
    int visible = kernels::visible_cuda_devices("nccl");
    int version = 0;
    ZPLAN_NCCL_CHECK(ncclGetVersion(&version));
    // NCCL_VERSION_CODE: major*10000 + minor*100 + patch since 2.9.
    out->versions["nccl"] = std::to_string(version / 10000) + "." +
                            std::to_string((version / 100) % 100) + "." +
                            std::to_string(version % 100);
    NcclCollectiveBench bench(group, visible);
    const SweepSettings settings = sweep_settings(options, /*gpu=*/true);
    for (hardware::Collective op :
         {hardware::Collective::kAllGather, hardware::Collective::kReduceScatter,
          hardware::Collective::kAllReduce}) {
      out->collectives.push_back(sweep_collective(bench, group, op, settings, progress));
    }
  }
};

}  // namespace

std::unique_ptr<Backend> make_nccl_backend() { return std::make_unique<NcclBackend>(); }

}  // namespace zplan::calibrate
