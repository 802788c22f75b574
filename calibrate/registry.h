// The registry of measurement backends: which ones zplan knows, which ones this build contains
// (decided by kernels/backends.cmake, read from the generated kernels/config.h), and how to
// make them. Explicit on purpose -- no static self-registration, which silently vanishes from
// static libraries (reference/style_anchors.md §10.2).
#ifndef ZPLAN_CALIBRATE_REGISTRY_H_
#define ZPLAN_CALIBRATE_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/backend.h"
#include "kernels/comm.h"

namespace zplan::calibrate {

struct BackendInfo {
  std::string name;
  std::string measures;        // one line for --help and docs
  bool compiled = false;       // in this build
  std::string configure_hint;  // how to get it when it is not, e.g. "-DZPLAN_WITH_NCCL=ON"
};

// host, mpi, cuda, nccl, fake, in that order.
std::vector<BackendInfo> known_backends();
std::vector<std::string> compiled_backends();

// Parses a --backend value: a comma list of names, or "auto", in any case. Throws InputError for
// an empty list or item, a duplicate, an unknown name ("unknown backend 'x'; known: ...") and a
// backend this build does not have: "backend 'nccl' is not compiled into this zplan (configure
// with -DZPLAN_WITH_NCCL=ON); available: host, mpi, fake".
std::vector<std::string> parse_backend_list(const std::string& list);
// The same against another registry (tests of builds without some backends).
std::vector<std::string> parse_backend_list(const std::string& list,
                                            const std::vector<BackendInfo>& known);

// "auto": host; plus cuda (and nccl, with 2 GPUs or more ranks) when the build has them and a
// CUDA device is visible; plus mpi when launched with more than one rank and no GPU backend runs.
std::vector<std::string> auto_backends(const kernels::Comm& group);

// Makes a backend this build has (REQUIRES: a name parse_backend_list accepted).
std::unique_ptr<Backend> make_backend(const std::string& name);

// The ranks of this run: MPI_COMM_WORLD when an MPI launcher started it (mpirun -np N), else
// a single process. Throws InputError when a launcher started it but this build has no MPI.
std::unique_ptr<kernels::Comm> make_process_comm();

// What this build contains: {"cuda": bool, "nccl": bool, "mpi": bool, "blas": bool,
// "io_uring": bool}.
nlohmann::json build_features();

}  // namespace zplan::calibrate

#endif  // ZPLAN_CALIBRATE_REGISTRY_H_
