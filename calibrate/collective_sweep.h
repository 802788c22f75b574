// The collective sweep: nccl-tests' conventions applied to any CollectiveBench (MPI, NCCL, fake).
//
// Sizes and bandwidths follow nccl-tests (reference/nccl_hardware.md §2.1): S is the total buffer
// for all_gather and reduce_scatter (count x n elements) and the per-rank buffer for all_reduce;
// algbw = S / t; busbw = algbw x 2(n-1)/n for all_reduce and (n-1)/n for all_gather and
// reduce_scatter. Timing follows nccl-tests' BenchTime (§2.2) and the methodology of §7.1:
// warm-up operations at every size (they also set up NCCL's channels and buffers), then blocks of
// back-to-back operations between two host timer reads; each block's time per operation is
// averaged over ranks (nccl-tests -a 1, the default), and the median over blocks is reported.
// The number of operations per block is chosen, as google/benchmark does, so that a block lasts
// about SweepSettings::target_block_s; all ranks agree on it through the group.
#ifndef ZPLAN_CALIBRATE_COLLECTIVE_SWEEP_H_
#define ZPLAN_CALIBRATE_COLLECTIVE_SWEEP_H_

#include <cstdint>
#include <ostream>
#include <vector>

#include "calibrate/backend.h"
#include "calibrate/fit.h"
#include "calibrate/measurements.h"
#include "calibrate/progress.h"
#include "kernels/comm.h"

namespace zplan::calibrate {

// nccl-tests' bus bandwidth factor for `op` on n ranks (AllReduceGetBw, AllGatherGetBw,
// ReduceScatterGetBw).
double bus_factor(hardware::Collective op, int ranks);

// The elements per rank and the size S nccl-tests uses for a requested size of `bytes`:
// all_gather/reduce_scatter round down to a multiple of ranks x type_bytes (count = bytes /
// (ranks x type_bytes) per rank, as nccl-tests' getCollByteCount does), all_reduce to a multiple
// of type_bytes. count = 0 when `bytes` is too small for one element per rank.
struct CollectiveSize {
  int64_t count = 0;
  double bytes = 0;
};
CollectiveSize collective_size(hardware::Collective op, double bytes, int ranks,
                               int type_bytes = 4);

// min, min*f, min*f^2, ... up to and including max (nccl-tests -b -e -f).
std::vector<double> geometric_sizes(double min_bytes, double max_bytes, double factor);

struct SweepSettings {
  double min_bytes = 8;
  double max_bytes = 64.0 * 1024 * 1024;
  double factor = 2;
  int warmup_iters = 5;  // per size; only the first when one operation outlasts a block
  int repeats = 5;       // timed blocks per size; the median is reported
  double target_block_s = 0.005;
  int max_iters = 1000;  // operations per block at most
};

// The sweep for `options` (its sweep preset and -b/-e/-f overrides). Quick: 8 B to 64 MiB, x2,
// 5 blocks of ~5 ms (out of place and in place each); full: 8 B to 8 GiB (gpu) or 1 GiB (CPU
// ranks), x2, 7 blocks of ~20 ms, as nccl-tests' -b 8 -e 8G -f 2; tiny: 8 B to 64 KiB, x4, 1
// block.
// Throws InputError naming --min-bytes / --max-bytes / --step-factor for impossible values.
SweepSettings sweep_settings(const ProbeOptions& options, bool gpu);

// Measures `op` over the sweep's sizes on every rank of `group` (collective).
CollectiveMeasurement sweep_collective(CollectiveBench& bench, kernels::Comm& group,
                                       hardware::Collective op, const SweepSettings& settings,
                                       Progress& progress);

// Prints the table as nccl-tests does (header lines start with '#'; size, count, type, redop,
// time (us), algbw and busbw (GB/s); "# Avg bus bandwidth" footer), then the fit, if given.
void print_collective_table(std::ostream& out, const CollectiveMeasurement& m,
                            const RegimeFit* fit);

}  // namespace zplan::calibrate

#endif  // ZPLAN_CALIBRATE_COLLECTIVE_SWEEP_H_
