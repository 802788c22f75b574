// The measurement backends of `zplan calibrate` and the interfaces at their I/O boundary.
//
// A Backend measures one part of the machine and adds it to Measurements: `host` (copies, CPU
// Adam, NVMe, BLAS sgemm, memory bandwidth), `mpi` and `nccl` (collectives), `cuda` (cuBLAS GEMMs,
// host<->device copies, HBM), and `fake` (deterministic numbers with seeded noise, for tests).
// Collective backends plug a CollectiveBench into one shared sweep (calibrate/collective_sweep.h)
// that times it the way nccl-tests does, so MPI, NCCL and the fake are measured and printed alike
// -- as ninja pairs CommandRunner with FakeCommandRunner (reference/style_anchors.md §1, §10.2).
//
// Which backends this build contains is decided at configure time (kernels/backends.cmake) and
// listed, explicitly, by calibrate/registry.cc; the factories below for mpi, cuda and nccl exist
// only in builds that have them.
#ifndef ZPLAN_CALIBRATE_BACKEND_H_
#define ZPLAN_CALIBRATE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "calibrate/measurements.h"
#include "calibrate/progress.h"
#include "hardware/profile.h"
#include "kernels/comm.h"

namespace zplan::calibrate {

// How much to measure. kQuick (the default) fits a CPU-only calibration of 2 ranks on 2 cores
// in well under a minute; kFull is the nccl-tests-like sweep for a real cluster; kTiny is for tests
// (sizes so small that nothing is meaningful except that the plumbing works).
enum class Sweep { kTiny, kQuick, kFull };
const char* sweep_name(Sweep sweep);  // "tiny", "quick", "full"

struct ProbeOptions {
  Sweep sweep = Sweep::kQuick;
  // Threads per rank for BLAS, Adam and the memory kernel; 0 = the node's online CPUs divided by
  // its ranks (what each rank of a training run, or of zplan's executor, gets), at most the CPUs
  // the rank is bound to (kernels/cpu_threads.h).
  int threads = 0;
  std::string nvme_path = ".";  // directory for the NVMe probe's (unlinked) temporary files
  // Collective sizes, nccl-tests' -b / -e / -f; 0 = the sweep's default.
  double min_bytes = 0;
  double max_bytes = 0;
  double step_factor = 0;
  // Fake backend only: wall-clock seconds it sleeps per measured size (interruption tests).
  double fake_delay_s = 0;
};

// Threads per rank for `options` on a node of `cpus` online CPUs shared by `local_ranks` ranks,
// each of which may run on `usable` CPUs (kernels::rank_threads).
int threads_per_rank(const ProbeOptions& options, int cpus, int local_ranks, int usable);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Throws InputError "backend '<name>': <what is missing>" if the backend cannot run here (no
  // device, a single rank for a collective backend). Called on every rank, for every selected
  // backend, before anything is measured.
  virtual void check(kernels::Comm& group, const ProbeOptions& options) = 0;
  // Measures and adds the results to *out (complete on rank 0). Collective over `group`.
  virtual void measure(kernels::Comm& group, const ProbeOptions& options, Progress& progress,
                       Measurements* out) = 0;
};

// A collective among a group of ranks, in the form nccl-tests times it (reference
// nccl_hardware.md §2.2, BenchTime): 4-byte float elements, sum, out of place or in place.
class CollectiveBench {
 public:
  virtual ~CollectiveBench() = default;
  virtual int ranks() const = 0;
  virtual int nodes() const = 0;
  virtual std::string backend() const = 0;
  // Makes room for operations whose nccl-tests size S is at most `max_bytes`.
  virtual void reserve(double max_bytes) = 0;
  // Runs `iters` back-to-back `op`s with `count` elements per rank and returns this rank's
  // wall-clock seconds for all of them, completion included (host timer around the launches, then
  // a synchronize). In place as nccl-tests arranges it: all_reduce sends and receives in one
  // buffer, all_gather sends from its rank's slot of the output, reduce_scatter receives into its
  // rank's slot of the input. Every rank calls it with the same arguments.
  virtual double run(hardware::Collective op, int64_t count, int iters, bool in_place) = 0;
};

// The host backend: always built (BLAS and io_uring are used when the build has them).
std::unique_ptr<Backend> make_host_backend();

// Built only with ZPLAN_HAVE_MPI / ZPLAN_HAVE_CUDA / ZPLAN_HAVE_NCCL; see calibrate/registry.cc.
std::unique_ptr<Backend> make_mpi_backend();
std::unique_ptr<Backend> make_cuda_backend();
std::unique_ptr<Backend> make_nccl_backend();

}  // namespace zplan::calibrate

#endif  // ZPLAN_CALIBRATE_BACKEND_H_
