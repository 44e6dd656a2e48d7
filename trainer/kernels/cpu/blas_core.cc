// OpenBLAS's kernel choice. Debian's OpenBLAS is a DYNAMIC_ARCH build: when it loads it picks
// its kernels from the CPU's family and model, and on a model it does not know (a virtual
// machine's generic "Intel Xeon Processor", seen here) it may settle on Prescott's SSE3
// kernels, which run sgemm several times slower than the AVX2 or AVX-512 kernels the CPU can
// run (1024^3 on one thread, one such machine: 24.6 GFLOP/s, against 65.0 with Haswell's and
// 140.3 with SkylakeX's). OpenBLAS reads OPENBLAS_CORETYPE only when it loads, so the choice is
// made again through its exported dynamic-arch entry points, as loading with the variable set
// would make it; the variable is set too, so that child processes (the PyTorch side of the
// benchmarks, whose BLAS is the same library) load the same kernels.
#include <cblas.h>

#include <cstdlib>
#include <set>
#include <string>

#include "trainer/kernels/cpu/gemm.h"

extern "C" {
// DYNAMIC_ARCH builds only: weak, so a build for one fixed target links and leaves its choice.
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace kolo::trainer::cpu {
namespace {

// x86-64 kernels of OpenBLAS without AVX2.
bool without_avx2(const std::string& core) {
  static const std::set<std::string> old = {
      "Prescott", "Core2",     "Penryn",  "Dunnington", "Nehalem",    "Atom",       "Sandybridge",
      "Nano",     "Barcelona", "Opteron", "Bulldozer",  "Piledriver", "Steamroller"};
  return old.count(core) > 0;
}

// The best kernels this CPU runs that OpenBLAS's x86-64 dynamic builds carry, or "".
const char* best_core() {
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512cd"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return "";
}

}  // namespace

const char* blas_kernels() {
  return openblas_get_corename();
}

void choose_blas_kernels() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user's choice
  if (gotoblas_dynamic_init == nullptr || gotoblas_dynamic_quit == nullptr) return;
  const std::string chosen = openblas_get_corename();
  const char* best = best_core();
  if (!without_avx2(chosen) || best[0] == '\0') return;
  setenv("OPENBLAS_CORETYPE", best, 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  if (openblas_get_corename() != std::string(best)) unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace kolo::trainer::cpu
