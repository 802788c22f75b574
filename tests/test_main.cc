// The one main() of zplan_tests (Catch2 v2 single header).
//
// ctest runs the [blas] tests once per OpenBLAS kernel family (OPENBLAS_CORETYPE, set by
// tests/CMakeLists.txt). OpenBLAS 0.3.21 (Debian 12) uses a forced family even where the CPU
// lacks its instructions -- SkylakeX on an AVX2-only EPYC dies of SIGILL in the first GEMM -- so
// a family this CPU cannot execute is reported as skipped (exit 77, the tests' SKIP_RETURN_CODE)
// instead of run.
#define CATCH_CONFIG_RUNNER
#include <cstdio>
#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>
#include <strings.h>

namespace {

// The instruction set a forced OpenBLAS family needs (driver/others/dynamic.c: the families'
// kernels), or nullptr for a name not listed here (OpenBLAS then keeps the family it detects).
const char* coretype_needs(const char* core) {
  struct Family {
    const char* name;
    const char* feature;
  };
  static const Family kFamilies[] = {
      {"sandybridge", "avx"},  {"haswell", "avx2"},       {"zen", "avx2"},
      {"skylakex", "avx512f"}, {"cooperlake", "avx512f"}, {"sapphirerapids", "avx512f"},
  };
  for (const Family& f : kFamilies)
    if (strcasecmp(core, f.name) == 0) return f.feature;
  return nullptr;
}

bool cpu_supports(const std::string& feature) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (feature == "avx") return __builtin_cpu_supports("avx");
  if (feature == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (feature == "avx512f") return __builtin_cpu_supports("avx512f");
#endif
  (void)feature;
  return true;
}

}  // namespace

int main(int argc, char* argv[]) {
  if (const char* core = std::getenv("OPENBLAS_CORETYPE")) {
    const char* need = coretype_needs(core);
    if (need != nullptr && !cpu_supports(need)) {
      std::printf("skipped: OPENBLAS_CORETYPE=%s needs %s, which this CPU does not have\n", core,
                  need);
      return 77;
    }
  }
  return Catch::Session().run(argc, argv);
}
