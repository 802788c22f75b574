// Group: the processes of one calibration run, and the few operations the driver needs to
// coordinate them -- start a probe on every rank at once, combine the ranks' timings, agree on
// iteration counts, hand rank 0's NCCL id to the others.
//
// These are not the operations being measured (the MPI and NCCL backends measure theirs on their
// own communicators); they are control traffic. A run launched by mpirun uses the MPI group
// (calibrate/mpi_group.cc, built with ZPLAN_HAVE_MPI); any other run is one process
// (make_single_process_group). Every method except the accessors is collective: all ranks call
// it, in the same order. Only rank 0 prints tables and writes the profile.
#ifndef ZPLAN_CALIBRATE_GROUP_H_
#define ZPLAN_CALIBRATE_GROUP_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace zplan::calibrate {

class Group {
 public:
  virtual ~Group() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This rank's index among the ranks on its node, and how many ranks its node has.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  // Host names of the run's nodes, in the order of their lowest rank.
  virtual const std::vector<std::string>& hosts() const = 0;
  int nodes() const { return static_cast<int>(hosts().size()); }
  // The MPI library's version string, or "" for a single process.
  virtual std::string library() const = 0;

  virtual void barrier() = 0;
  // Element-wise sum / maximum over ranks, in place; every rank gets the result.
  virtual void sum(std::vector<double>* values) = 0;
  virtual void max(std::vector<double>* values) = 0;
  // Copies `bytes` bytes at `data` from rank `root` to every rank.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;

  double sum(double v) {
    std::vector<double> x{v};
    sum(&x);
    return x[0];
  }
  double max(double v) {
    std::vector<double> x{v};
    max(&x);
    return x[0];
  }
};

// A group of one process on this host.
std::unique_ptr<Group> make_single_process_group();

// MPI_COMM_WORLD (calibrate/mpi_group.cc; only in builds with ZPLAN_HAVE_MPI). Initializes MPI
// unless it already is, and finalizes it on destruction if it initialized it -- except while an
// exception unwinds, when the process should exit without MPI_Finalize so that mpirun stops the
// other ranks instead of leaving them waiting in a collective.
std::unique_ptr<Group> make_mpi_group();

// "NAME=value" of the environment variable that shows this process was started by an MPI
// launcher (Open MPI's mpirun, MPICH/Hydra, MVAPICH, a PMIx launcher such as srun), else "".
std::string mpi_launcher_variable();

// This machine's host name.
std::string host_name();

}  // namespace zplan::calibrate

#endif  // ZPLAN_CALIBRATE_GROUP_H_
