#include "kernels/check.h"

#include <algorithm>

namespace zplan::kernels {

namespace {

// CMake passes absolute source paths; keep the part from the repository's top folder on.
std::string repo_path(const char* file) {
  // The leftmost top-level folder: tests/calibrate/x.cc stays whole.
  std::string path = file;
  size_t best = std::string::npos;
  for (const char* top : {"/calibrate/", "/executor/", "/kernels/", "/cli/", "/tests/"}) {
    best = std::min(best, path.find(top));
  }
  return best == std::string::npos ? path : path.substr(best + 1);
}

}  // namespace

void throw_call_error(const char* library, const char* file, int line, const char* call,
                      const std::string& message) {
  throw BackendError(repo_path(file) + ":" + std::to_string(line),
                     std::string(library) + " call " + call + " failed: " + message);
}

void throw_unavailable(const std::string& backend, const std::string& missing) {
  throw InputError("backend '" + backend + "'", missing);
}

}  // namespace zplan::kernels
