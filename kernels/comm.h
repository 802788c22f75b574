// ExecutorComm: the collectives the reference executor runs among its ranks, on fp32 buffers.
//
// One rank stands for one device (GPU). Collectives travel on channels: each channel is an
// independent communicator (an MPI_Comm_dup), so the executor's streams -- the compute stream,
// stage 3's all-gather stream and the reduce stream -- can each run a collective at the same time
// from their own threads, as NCCL runs collectives on several CUDA streams. On one channel every
// rank issues the same collectives in the same order (they come from the same step graph).
//
// Two implementations: MPI (kernels/comm_mpi.cc, with ZPLAN_HAVE_MPI) for real runs
// under mpirun, and threads of one process (make_thread_comms) -- the fake that lets tests run
// several ranks without MPI. Sums run in rank order in the fake; with two ranks a + b == b + a, so
// both give bit-identical results.
//
// Failure: a rank that dies must not leave the others waiting forever. The MPI implementation
// runs a watchdog that aborts the job when a collective makes no progress for `timeout_s`, and
// mpirun itself kills the survivors when a rank exits; the fake's waits give up after timeout_s
// and throw.
#ifndef ZPLAN_KERNELS_COMM_H_
#define ZPLAN_KERNELS_COMM_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace zplan::kernels {

class ExecutorComm {
 public:
  virtual ~ExecutorComm() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int channels() const = 0;
  virtual std::string name() const = 0;  // "mpi (Open MPI v4.1.4, ...)", "threads"

  // Sum over ranks of `count` floats, in place.
  virtual void all_reduce(int channel, float* data, size_t count) = 0;
  // Every rank's `count` floats at `send`, concatenated in rank order into `recv` (count * size
  // floats). `send` may be recv + rank * count (in place).
  virtual void all_gather(int channel, const float* send, size_t count, float* recv) = 0;
  // `data` holds size * count floats; afterwards data[0, count) holds the sum over ranks of
  // their block `rank` (in place, as MPI_Reduce_scatter_block with MPI_IN_PLACE).
  virtual void reduce_scatter(int channel, float* data, size_t count) = 0;

  virtual void barrier(int channel) = 0;
  // Element-wise maximum / sum over ranks of doubles, in place (control traffic).
  virtual void max(int channel, std::vector<double>* values) = 0;
  virtual void sum(int channel, std::vector<double>* values) = 0;
  // Concatenation of every rank's `values` (same length on every rank), on every rank.
  virtual std::vector<double> gather_all(int channel, const std::vector<double>& values) = 0;

  // Ends every rank of the job now with `message` (a rank that cannot go on). Does not return.
  [[noreturn]] virtual void abort(const std::string& message) = 0;
};

// `ranks` ranks of one process, to be used from `ranks` threads (one ExecutorComm each), with
// `channels` channels. A wait that lasts longer than timeout_s throws InputError.
std::vector<std::unique_ptr<ExecutorComm>> make_thread_comms(int ranks, int channels,
                                                             double timeout_s = 60);

// The ranks of MPI_COMM_WORLD (MPI must be initialized with mpi_init_for_executor). A collective
// that makes no progress for timeout_s aborts the job with a message naming the rank, the channel
// and the operation. Throws BackendError in a build without MPI.
std::unique_ptr<ExecutorComm> make_mpi_comm(int channels, double timeout_s);

// True iff this build can run ranks under MPI.
bool executor_has_mpi();

// Initializes MPI for the executor (MPI_THREAD_MULTIPLE) if it is not initialized yet; returns
// false when this build has no MPI. Throws BackendError when MPI cannot give thread support.
bool mpi_init_for_executor(int* argc, char*** argv);
void mpi_finalize_for_executor();

}  // namespace zplan::kernels

#endif  // ZPLAN_KERNELS_COMM_H_
