// The CPU's reduction ISA level, found independently of comm/reduce so that a detection bug
// cannot quietly make the reduction tests skip the vector kernels (reduce_test.cc,
// reduce_isa_test.cc).
#pragma once

#include <cpuid.h>

#include "comm/reduce/reduce.h"

namespace kolo::reduce {

inline Isa cpu_isa() {
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    return Isa::kAvx512;
  }
  return avx2 ? Isa::kAvx2 : Isa::kScalar;
}

}  // namespace kolo::reduce
