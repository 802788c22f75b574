// Comm: the ranks of one run and the collectives among them -- the one communicator of zplan.
// Calibration uses it for its control traffic (start a probe on every rank at once, combine the
// ranks' timings, hand rank 0's NCCL id to the others); the reference executor for its
// collectives on fp32 buffers and its control traffic. The operations being measured by the mpi
// and nccl calibration backends are not these: they run on the backends' own communicators.
//
// One rank stands for one device (GPU) or one calibrating process. Collectives travel on
// channels: each channel is an independent communicator (an MPI_Comm_dup), so the executor's
// streams -- the compute stream, stage 3's all-gather stream and the reduce stream -- can each
// run a collective at the same time from their own threads, as NCCL runs collectives on several
// CUDA streams. On one channel every rank issues the same collectives in the same order. The
// shorthands without a channel use channel 0.
//
// Implementations: MPI_COMM_WORLD (kernels/comm_mpi.cc, with ZPLAN_HAVE_MPI) for real runs under
// mpirun; threads of one process (make_thread_comms), the fake that lets tests run several ranks
// without MPI and that is the whole "group" of a run without a launcher; NCCL for the CUDA
// executor device (kernels/comm_nccl.cc), with its control traffic on an MPI or thread Comm. Sums
// run in rank order in the fake; with two ranks a + b == b + a, so both give bit-identical
// results.
//
// Failure: a rank that dies must not leave the others waiting forever. The MPI implementation can
// run a watchdog that aborts the job when a collective makes no progress for timeout_s, and
// mpirun itself kills the survivors when a rank exits; the fake's waits give up after timeout_s
// and throw.
#ifndef ZPLAN_KERNELS_COMM_H_
#define ZPLAN_KERNELS_COMM_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace zplan::kernels {

class Comm {
 public:
  virtual ~Comm() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This rank's index among the ranks on its node, and how many ranks its node has.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  // Host names of the run's nodes, in the order of their lowest rank.
  virtual const std::vector<std::string>& hosts() const = 0;
  int nodes() const { return static_cast<int>(hosts().size()); }
  // The MPI library's version string, or "" for threads of one process.
  virtual std::string library() const = 0;
  virtual int channels() const = 0;
  virtual std::string name() const = 0;  // "mpi (Open MPI v4.1.4)", "threads", "nccl 2.21.5"

  // --- Data: fp32 buffers ---
  // Sum over ranks of `count` floats, in place.
  virtual void all_reduce(int channel, float* data, size_t count) = 0;
  // Every rank's `count` floats at `send`, concatenated in rank order into `recv` (count * size
  // floats). `send` may be recv + rank * count (in place).
  virtual void all_gather(int channel, const float* send, size_t count, float* recv) = 0;
  // `data` holds size * count floats; afterwards data[0, count) holds the sum over ranks of
  // their block `rank` (in place, as MPI_Reduce_scatter_block with MPI_IN_PLACE).
  virtual void reduce_scatter(int channel, float* data, size_t count) = 0;

  // --- Control traffic: host memory ---
  virtual void barrier(int channel) = 0;
  // Element-wise maximum / sum over ranks of doubles, in place; every rank gets the result.
  virtual void max(int channel, std::vector<double>* values) = 0;
  virtual void sum(int channel, std::vector<double>* values) = 0;
  // Concatenation of every rank's `values` (same length on every rank), on every rank.
  virtual std::vector<double> gather_all(int channel, const std::vector<double>& values) = 0;
  // Copies `bytes` bytes at `data` from rank `root` to every rank.
  virtual void broadcast(int channel, void* data, size_t bytes, int root) = 0;

  // Ends every rank of the job now with `message` (a rank that cannot go on). Does not return
  // (the thread fake throws InputError instead).
  [[noreturn]] virtual void abort(const std::string& message) = 0;

  // --- Groups ---
  // A communicator of the ranks that pass the same `color` (>= 0), ranked in this Comm's order,
  // with as many channels -- MPI_Comm_split (key = rank), which DeepSpeed's dist.new_group is
  // for zplan's purposes (ZeRO++ hpZ groups, MiCS shard and replica groups). Collective: every
  // rank of this Comm calls it, in the same order as its other splits. Its local_rank,
  // local_size and hosts are the group's own; aborting it aborts the job.
  virtual std::unique_ptr<Comm> split(int color) = 0;

  // Shorthands on channel 0.
  void barrier() { barrier(0); }
  void sum(std::vector<double>* values) { sum(0, values); }
  void max(std::vector<double>* values) { max(0, values); }
  void broadcast(void* data, size_t bytes, int root) { broadcast(0, data, bytes, root); }
  double sum(double v);
  double max(double v);
};

// `ranks` ranks of one process, to be used from `ranks` threads (one Comm each), with `channels`
// channels. A wait that lasts longer than timeout_s throws InputError.
std::vector<std::unique_ptr<Comm>> make_thread_comms(int ranks, int channels,
                                                     double timeout_s = 60);

// This process alone: one rank, one channel (a calibration run without a launcher).
std::unique_ptr<Comm> make_single_process_comm();

struct MpiCommOptions {
  int channels = 1;
  // A collective without progress for this long aborts the job with a line naming the rank, the
  // channel and the operation; 0: no watchdog (calibration, whose ranks wait for each other's
  // probes for as long as those take).
  double timeout_s = 0;
  // The ranks' threads call MPI concurrently (the executor's streams): MPI must provide
  // MPI_THREAD_MULTIPLE, else BackendError.
  bool concurrent_threads = false;
  // Print "stopped by the MPI launcher (another rank failed)" when mpirun sends SIGTERM, instead
  // of dying silently (the executor; calibration has its own handler, calibrate/interrupt.h).
  bool report_launcher_kill = false;
};

// The ranks of MPI_COMM_WORLD, one channel per MPI_Comm_dup. Initializes MPI (asking for
// MPI_THREAD_MULTIPLE) unless it already is -- the one place zplan initializes MPI -- and
// finalizes it on destruction if it initialized it, except while an exception unwinds, when the
// process should exit without MPI_Finalize so that mpirun stops the other ranks instead of
// leaving them waiting in a collective. Throws BackendError in a build without MPI.
std::unique_ptr<Comm> make_mpi_comm(const MpiCommOptions& options);

// True iff this build can run ranks under MPI.
bool comm_has_mpi();

// "NAME=value" of the environment variable that shows this process was started by an MPI
// launcher (Open MPI's mpirun, MPICH/Hydra, MVAPICH, a PMIx launcher such as srun), else "".
std::string mpi_launcher_variable();
// This process's rank as the MPI launcher set it in the environment (OMPI_COMM_WORLD_RANK,
// PMI_RANK, MV2_COMM_WORLD_RANK, PMIX_RANK), before MPI is initialized; -1 without a launcher.
int mpi_launcher_rank();

// This machine's host name.
std::string host_name();

}  // namespace zplan::kernels

#endif  // ZPLAN_KERNELS_COMM_H_
