// OpenBLAS's kernel choice (kernels/cpu/blas_core.cc): on a CPU with AVX2 and FMA the trainer's
// GEMMs never run OpenBLAS's older kernels unless OPENBLAS_CORETYPE asked for them. (Debian's
// OpenBLAS falls back to Prescott's SSE3 kernels on CPU models it does not know, 3-6x slower.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "trainer/kernels/backend.h"
#include "trainer/kernels/cpu/gemm.h"

namespace kolo::trainer {
namespace {

TEST(KernelsBlas, OpenBlasRunsAvx2KernelsWhereTheCpuHasThem) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  cpu_backend();  // makes the choice
  const std::string core = cpu::blas_kernels();
  static const std::set<std::string> avx2 = {"Haswell",        "Zen",      "SkylakeX", "Cooperlake",
                                             "SapphireRapids", "Excavator"};
  if (avx2.count(core) > 0) return;
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  if (forced != nullptr && core == forced) GTEST_SKIP() << "OPENBLAS_CORETYPE=" << forced;
  FAIL() << "OpenBLAS runs its " << core << " kernels on a CPU with AVX2 and FMA";
}

}  // namespace
}  // namespace kolo::trainer
