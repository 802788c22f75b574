// How `zplan validate` starts its ranks. From a normal shell with more than one rank it runs the
// same command again under `mpirun -np ranks` (each rank then knows it was re-launched); under an
// MPI launcher every rank opens the communicator (kernels::make_mpi_comm, where MPI is
// initialized) and its device; one rank without a launcher runs in this process.
#ifndef ZPLAN_EXECUTOR_LAUNCH_H_
#define ZPLAN_EXECUTOR_LAUNCH_H_

#include <memory>
#include <string>
#include <vector>

#include "executor/device.h"
#include "kernels/comm.h"

namespace zplan::executor {

// True iff this process is one of the ranks that relaunch_under_mpirun started.
bool relaunched();

// True iff this process must start the ranks itself under mpirun: more than one rank and no MPI
// launcher around it. Throws InputError when it should but cannot (a re-launched rank that sees
// no launcher; a build without MPI, naming --ranks).
bool needs_mpirun(int ranks);

// How a re-launch ended: mpirun's exit code, or the signal that stopped it (0: none).
struct RelaunchResult {
  int exit_code = 0;
  int signal = 0;
};

// Runs this same command (its own executable and arguments) under `mpirun -np ranks` and waits
// for it. With Open MPI it allows root and oversubscription, and binds each rank to its share of
// the cores (cores / ranks of them, --map-by slot:PE=k) when there are enough of them. Throws InputError when mpirun is not on PATH or cannot be started.
RelaunchResult relaunch_under_mpirun(int ranks);

// Open MPI's mapping and binding arguments for `ranks` ranks on `cpus` CPUs: each rank bound to
// its share, cpus / ranks cores (--map-by slot:PE=k --bind-to core); unbound when the ranks
// outnumber the CPUs.
std::vector<std::string> open_mpi_binding(int ranks, int cpus);

struct RankOptions {
  int ranks = 1;
  bool cuda = false;           // the CUDA device (one GPU per rank, NCCL), else the CPU device
  // The CPU device's BLAS threads: the profile's CPUs per node (0: this machine's) shared by
  // ranks_per_node ranks, at most the CPUs the rank is bound to (kernels/cpu_threads.h), so that
  // the executor runs the threads the simulation prices (sim/step_builder.cc).
  int ranks_per_node = 1;
  int node_cpus = 0;
  double comm_timeout_s = 60;  // a collective without progress this long aborts the job
};

// This process's rank of a validate run: its communicator (MPI ranks under a launcher, else one
// rank of threads) and its device. Throws InputError when the launcher started another number of
// ranks than options.ranks, or when the device cannot be had (make_cuda_device).
class Rank {
 public:
  explicit Rank(const RankOptions& options);
  ~Rank();  // the device first (the CUDA device's NCCL runs over the communicator), then MPI
  Rank(const Rank&) = delete;
  Rank& operator=(const Rank&) = delete;

  int rank() const { return comm_->rank(); }
  ExecutorDevice& device() { return *device_; }

 private:
  std::unique_ptr<kernels::Comm> comm_;
  std::unique_ptr<ExecutorDevice> device_;
};

}  // namespace zplan::executor

#endif  // ZPLAN_EXECUTOR_LAUNCH_H_
