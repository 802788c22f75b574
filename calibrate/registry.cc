#include "calibrate/registry.h"

#include <algorithm>

#include "calibrate/fake_backend.h"
#include "kernels/config.h"
#include "base/input_error.h"
#if ZPLAN_HAVE_CUDA
#include "kernels/cuda_info.h"
#endif

namespace zplan::calibrate {

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// CUDA devices visible to this process, 0 without the cuda backend or without a device.
int quiet_cuda_devices() {
#if ZPLAN_HAVE_CUDA
  try {
    return kernels::visible_cuda_devices("cuda");
  } catch (const InputError&) {
    return 0;
  }
#else
  return 0;
#endif
}

}  // namespace

std::vector<BackendInfo> known_backends() {
  return {
      {"host", "host copies, CPU Adam, NVMe (O_DIRECT), BLAS sgemm sweep, memory bandwidth", true,
       ""},
      {"mpi", "all_gather, reduce_scatter, all_reduce among MPI ranks", ZPLAN_HAVE_MPI == 1,
       "-DZPLAN_WITH_MPI=ON"},
      {"cuda", "cuBLAS GEMM sweep (bf16, fp16), H2D/D2H pinned and pageable, device-to-device",
       ZPLAN_HAVE_CUDA == 1, "-DZPLAN_WITH_CUDA=ON"},
      {"nccl", "NCCL all_gather, reduce_scatter, all_reduce", ZPLAN_HAVE_NCCL == 1,
       "-DZPLAN_WITH_NCCL=ON"},
      {"fake", "deterministic numbers with seeded noise, for tests", true, ""},
  };
}

std::vector<std::string> compiled_backends() {
  std::vector<std::string> names;
  for (const BackendInfo& b : known_backends()) {
    if (b.compiled) names.push_back(b.name);
  }
  return names;
}

std::vector<std::string> parse_backend_list(const std::string& list) {
  return parse_backend_list(list, known_backends());
}

std::vector<std::string> parse_backend_list(const std::string& given,
                                            const std::vector<BackendInfo>& known) {
  const std::string list = ascii_lower(given);  // "Host,MPI" as "host,mpi"
  std::vector<std::string> available;
  for (const BackendInfo& b : known) {
    if (b.compiled) available.push_back(b.name);
  }
  if (list.empty()) throw InputError("--backend", "is empty; available: " + join(available));
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string name =
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? list.size() + 1 : comma + 1;
    if (name.empty()) throw InputError("--backend", "has an empty item in '" + list + "'");
    if (name == "auto") {
      if (list != "auto") throw InputError("--backend", "'auto' cannot be combined with others");
      return {"auto"};
    }
    auto it = std::find_if(known.begin(), known.end(),
                           [&](const BackendInfo& b) { return b.name == name; });
    if (it == known.end()) {
      std::vector<std::string> all;
      for (const BackendInfo& b : known) all.push_back(b.name);
      throw InputError("", "unknown backend '" + name + "'; known: " + join(all) +
                               "; available in this zplan: " + join(available));
    }
    if (!it->compiled) {
      throw InputError("", "backend '" + name + "' is not compiled into this zplan (configure " +
                               "with " + it->configure_hint + "); available: " + join(available));
    }
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      throw InputError("--backend", "lists '" + name + "' twice");
    }
    names.push_back(name);
  }
  return names;
}

std::vector<std::string> auto_backends(const kernels::Comm& group) {
  std::vector<std::string> names = {"host"};
  const int gpus = quiet_cuda_devices();
  if (gpus > 0) {
    names.push_back("cuda");
    if (ZPLAN_HAVE_NCCL && (gpus >= 2 || group.size() > 1)) names.push_back("nccl");
  } else if (ZPLAN_HAVE_MPI && group.size() > 1) {
    names.push_back("mpi");
  }
  return names;
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "host") return make_host_backend();
  if (name == "fake") return make_fake_backend();
#if ZPLAN_HAVE_MPI
  if (name == "mpi") return make_mpi_backend();
#endif
#if ZPLAN_HAVE_CUDA
  if (name == "cuda") return make_cuda_backend();
#endif
#if ZPLAN_HAVE_NCCL
  if (name == "nccl") return make_nccl_backend();
#endif
  parse_backend_list(name);  // throws the user-facing message
  throw InputError("", "backend '" + name + "' cannot be created");
}

std::unique_ptr<kernels::Comm> make_process_comm() {
  const std::string launcher = kernels::mpi_launcher_variable();
  if (launcher.empty()) return kernels::make_single_process_comm();
#if ZPLAN_HAVE_MPI
  return kernels::make_mpi_comm(kernels::MpiCommOptions{});
#else
  throw InputError("", "started by an MPI launcher (" + launcher +
                           ") but this zplan has no MPI (configure with -DZPLAN_WITH_MPI=ON); "
                           "every rank would calibrate alone");
#endif
}

nlohmann::json build_features() {
  return {{"cuda", ZPLAN_HAVE_CUDA == 1},
          {"nccl", ZPLAN_HAVE_NCCL == 1},
          {"mpi", ZPLAN_HAVE_MPI == 1},
          {"blas", ZPLAN_HAVE_BLAS == 1},
          {"io_uring", ZPLAN_HAVE_URING == 1}};
}

}  // namespace zplan::calibrate
