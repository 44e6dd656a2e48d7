// <immintrin.h> for the files built with -mavx512f (comm/reduce/avx512.cc,
// trainer/kernels/cpu/avx512.cc). GCC 12's AVX-512 intrinsics build their "undefined"
// pass-through operands from self-initialised variables, which -Wmaybe-uninitialized (and, for
// the conversions, -Wuninitialized) flags once they are inlined (a known false positive of that
// release). The operands are meant to be undefined.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
