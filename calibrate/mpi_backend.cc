// The mpi backend: all_gather, reduce_scatter and all_reduce among the MPI ranks of the run
// (MPI_Allgather, MPI_Reduce_scatter_block, MPI_Allreduce on MPI_FLOAT with MPI_SUM, out of
// place and with MPI_IN_PLACE), the collectives CPU ranks of a training run -- and zplan's
// reference executor, which runs them in place -- use.
// Built with ZPLAN_HAVE_MPI; timed by the shared nccl-tests-style sweep (collective_sweep.h).
//
// On more than one node it times two tiers, as a multi-node cluster has them: first each node's
// ranks among themselves (every node at once, on a communicator per node: the shared-memory
// tier, as hpZ's and MiCS's intra-node groups use it), then all the ranks together (the
// collectives that cross the nodes' links). The profile builder takes the intra-node link from
// the first and the network from the second (docs/calibration.md).
#include <algorithm>
#include <string>
#include <vector>

#include <mpi.h>

#include "calibrate/backend.h"
#include "calibrate/collective_sweep.h"
#include "kernels/check.h"
#include "kernels/comm.h"

namespace zplan::calibrate {

namespace {

class MpiCollectiveBench : public CollectiveBench {
 public:
  // The collectives of `comm` (MPI_COMM_WORLD, or one node's ranks), which spans `nodes` nodes.
  MpiCollectiveBench(MPI_Comm comm, int nodes) : comm_(comm), nodes_(nodes) {
    ZPLAN_MPI_CHECK(MPI_Comm_size(comm, &ranks_));
  }
  int ranks() const override { return ranks_; }
  int nodes() const override { return nodes_; }
  std::string backend() const override { return "mpi"; }

  void reserve(double max_bytes) override {
    // Every op's send and receive buffers fit in S bytes (nccl-tests' sizes, §2.1).
    size_t floats = static_cast<size_t>(max_bytes / 4) + size_t(ranks_);
    if (send_.size() < floats) {
      send_.assign(floats, 1.0f);
      recv_.assign(floats, 0.0f);
    }
  }

  double run(hardware::Collective op, int64_t count, int iters, bool in_place) override {
    const int c = static_cast<int>(count);
    float* recv = recv_.data();
    const float* send = in_place ? nullptr : send_.data();
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
      switch (op) {
        case hardware::Collective::kAllGather:
          // In place: this rank's contribution already sits in its slot of the output.
          ZPLAN_MPI_CHECK(MPI_Allgather(in_place ? MPI_IN_PLACE : send, c, MPI_FLOAT, recv, c,
                                        MPI_FLOAT, comm_));
          break;
        case hardware::Collective::kReduceScatter:
          // In place: the input is recv (c x n elements); the result lands in its first c.
          ZPLAN_MPI_CHECK(MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : send, recv, c,
                                                   MPI_FLOAT, MPI_SUM, comm_));
          break;
        case hardware::Collective::kAllReduce:
          ZPLAN_MPI_CHECK(MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, c, MPI_FLOAT, MPI_SUM,
                                        comm_));
          break;
      }
    }
    return MPI_Wtime() - t0;
  }

 private:
  MPI_Comm comm_;
  int ranks_ = 0;
  int nodes_;
  std::vector<float> send_;
  std::vector<float> recv_;
};

class MpiBackend : public Backend {
 public:
  std::string name() const override { return "mpi"; }

  void check(kernels::Comm& group, const ProbeOptions&) override {
    if (group.library().empty()) {
      kernels::throw_unavailable("mpi",
                                 "not started by an MPI launcher; run it as mpirun -np N zplan "
                                 "calibrate --backend mpi ...");
    }
    if (group.size() < 2) {
      kernels::throw_unavailable(
          "mpi", "needs at least 2 MPI ranks, this run has 1 (mpirun -np N, N >= 2)");
    }
  }

  void measure(kernels::Comm& group, const ProbeOptions& options, Progress& progress,
               Measurements* out) override {
    const SweepSettings settings = sweep_settings(options, /*gpu=*/false);
    auto sweep = [&](MpiCollectiveBench& bench) {
      for (hardware::Collective op :
           {hardware::Collective::kAllGather, hardware::Collective::kReduceScatter,
            hardware::Collective::kAllReduce}) {
        out->collectives.push_back(sweep_collective(bench, group, op, settings, progress));
      }
    };
    if (group.nodes() > 1) {
      MPI_Comm node = node_comm(group);
      if (node != MPI_COMM_NULL) {
        MpiCollectiveBench intra(node, 1);
        sweep(intra);
        ZPLAN_MPI_CHECK(MPI_Comm_free(&node));
      } else {
        progress.note("mpi: the nodes hold different numbers of ranks; no intra-node sweep");
      }
    }
    MpiCollectiveBench world(MPI_COMM_WORLD, group.nodes());
    sweep(world);
    out->versions["mpi"] = group.library();
  }

 private:
  // The ranks on this rank's node (those with its host name: the node membership of
  // kernels::Comm), when every node holds the same number of ranks (else MPI_COMM_NULL on every
  // rank). Collective over MPI_COMM_WORLD.
  static MPI_Comm node_comm(kernels::Comm& group) {
    const auto& hosts = group.hosts();
    const int color = static_cast<int>(
        std::find(hosts.begin(), hosts.end(), kernels::host_name()) - hosts.begin());
    MPI_Comm node = MPI_COMM_NULL;
    ZPLAN_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, group.rank(), &node));
    int size = 0;
    ZPLAN_MPI_CHECK(MPI_Comm_size(node, &size));
    std::vector<double> extremes{double(size), -double(size)};
    group.max(&extremes);
    if (extremes[0] != -extremes[1] || size < 2) ZPLAN_MPI_CHECK(MPI_Comm_free(&node));
    return node;
  }
};

}  // namespace

std::unique_ptr<Backend> make_mpi_backend() { return std::make_unique<MpiBackend>(); }

}  // namespace zplan::calibrate
