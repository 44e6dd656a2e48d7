// Array conversion between DTypes. float32 / float16 / bfloat16 pairs go through fp32 in
// registers, with a table of kernels (scalar, or AVX2 + F16C chosen once from the CPU); pairs
// with float64 or an integer type go element by element through double. Buffers are addressed as
// bytes and read with memcpy or unaligned loads, because callers pass file data at any alignment.
#include "comm/base/convert.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "comm/base/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define KOLO_CONVERT_X86 1
// The file is built for baseline x86; only the functions marked with this use AVX2 and F16C,
// and they run only after the CPU check below.
#define KOLO_AVX2_F16C __attribute__((target("avx2,f16c")))
#endif

namespace kolo {
namespace {

// --- fp32-domain codecs: one element through the helpers of convert.h ------------------------

struct F32 {
  static constexpr size_t kSize = 4;
  static float load(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(uint8_t* p, float v) { std::memcpy(p, &v, sizeof v); }
};

// The 16-bit storage dtypes: bits in memory, converted by the helpers of convert.h.
template <uint16_t (*kEncode)(float), float (*kDecode)(uint16_t)>
struct Bits16 {
  static constexpr size_t kSize = 2;
  static float load(const uint8_t* p) {
    uint16_t bits;
    std::memcpy(&bits, p, sizeof bits);
    return kDecode(bits);
  }
  static void store(uint8_t* p, float v) {
    const uint16_t bits = kEncode(v);
    std::memcpy(p, &bits, sizeof bits);
  }
};
using F16 = Bits16<float_to_half, half_to_float>;
using BF16 = Bits16<float_to_bfloat16, bfloat16_to_float>;

// dst (To) = src (From) * scale, n elements. Scale 1 never multiplies: a multiply would quieten
// a signalling NaN that a plain widening keeps, and every path must give the same bits.
template <typename From, typename To, bool kScaled>
void scalar_loop(uint8_t* dst, const uint8_t* src, size_t n, float scale) {
  for (size_t i = 0; i < n; ++i) {
    float v = From::load(src + i * From::kSize);
    if constexpr (kScaled) v *= scale;
    To::store(dst + i * To::kSize, v);
  }
}

template <typename From, typename To>
struct ScalarKernel {
  static void run(uint8_t* dst, const uint8_t* src, size_t n, float scale) {
    if (scale == 1.0f) {
      scalar_loop<From, To, false>(dst, src, n, scale);
    } else {
      scalar_loop<From, To, true>(dst, src, n, scale);
    }
  }
};

// [from][to] for every pair of fp32-domain dtypes (float32, float16, bfloat16).
using Kernel = void (*)(uint8_t* dst, const uint8_t* src, size_t n, float scale);
struct KernelTable {
  Kernel kernel[3][3];
};
template <template <typename, typename> class K>
constexpr KernelTable make_table() {
  return {{{K<F32, F32>::run, K<F32, F16>::run, K<F32, BF16>::run},
           {K<F16, F32>::run, K<F16, F16>::run, K<F16, BF16>::run},
           {K<BF16, F32>::run, K<BF16, F16>::run, K<BF16, BF16>::run}}};
}
constexpr KernelTable kScalarKernels = make_table<ScalarKernel>();

#ifdef KOLO_CONVERT_X86
// --- AVX2 + F16C: the same codecs on 8 lanes ----------------------------------------------------

template <typename Codec>
struct Lanes;

template <>
struct Lanes<F32> {
  KOLO_AVX2_F16C static __m256 load(const uint8_t* p) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  }
  KOLO_AVX2_F16C static void store(uint8_t* p, __m256 v) {
    _mm256_storeu_ps(reinterpret_cast<float*>(p), v);
  }
};

// vcvtph2ps and vcvtps2ph round exactly as half_to_float and float_to_half (subnormals,
// overflow to infinity, NaN quietened with its payload kept).
template <>
struct Lanes<F16> {
  KOLO_AVX2_F16C static __m256 load(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  KOLO_AVX2_F16C static void store(uint8_t* p, __m256 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

template <>
struct Lanes<BF16> {
  KOLO_AVX2_F16C static __m256 load(const uint8_t* p) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
  }
  // float_to_bfloat16 in integer lanes: add 0x7FFF plus the lowest kept bit and keep the top
  // half; NaN lanes (magnitude above infinity's bits) are truncated and made quiet instead.
  KOLO_AVX2_F16C static void store(uint8_t* p, __m256 v) {
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
    const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF));
    const __m256i is_nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7F800000));
    const __m256i r = _mm256_blendv_epi8(rounded, quiet, is_nan);
    // Every lane is below 0x10000, so the unsigned saturating pack just narrows.
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
  }
};

template <typename From, typename To, bool kScaled>
KOLO_AVX2_F16C void avx2_loop(uint8_t* dst, const uint8_t* src, size_t n, float scale) {
  const __m256 s = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = Lanes<From>::load(src + i * From::kSize);
    if constexpr (kScaled) v = _mm256_mul_ps(v, s);
    Lanes<To>::store(dst + i * To::kSize, v);
  }
  // The tail through the scalar helpers, which round exactly as the lanes do.
  scalar_loop<From, To, kScaled>(dst + i * To::kSize, src + i * From::kSize, n - i, scale);
}

template <typename From, typename To>
struct Avx2Kernel {
  KOLO_AVX2_F16C static void run(uint8_t* dst, const uint8_t* src, size_t n, float scale) {
    if (scale == 1.0f) {
      avx2_loop<From, To, false>(dst, src, n, scale);
    } else {
      avx2_loop<From, To, true>(dst, src, n, scale);
    }
  }
};
constexpr KernelTable kAvx2Kernels = make_table<Avx2Kernel>();

// __builtin_cpu_supports checks that the OS saves the YMM registers, not just the CPUID bit;
// F16C comes straight from CPUID because not every compiler's builtin knows its name (its OS
// support is AVX's).
bool cpu_has_avx2_f16c() {
  static const bool yes = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 &&
           (ecx & bit_F16C) != 0;
  }();
  return yes;
}
const KernelTable& best_kernels() {
  return cpu_has_avx2_f16c() ? kAvx2Kernels : kScalarKernels;
}
#else
bool cpu_has_avx2_f16c() {
  return false;
}
const KernelTable& best_kernels() {
  return kScalarKernels;
}
#endif

// Index of a fp32-domain dtype in the kernel tables; -1 for every other dtype.
int float_index(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 0;
    case DType::kFloat16: return 1;
    case DType::kBFloat16: return 2;
    default: return -1;
  }
}

// --- the double path: float64 and integer types ----------------------------------------------

template <typename T>
T load_as(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
void store_as(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

double load_double(DType dtype, const uint8_t* p) {
  switch (dtype) {
    case DType::kFloat32: return load_as<float>(p);
    case DType::kFloat64: return load_as<double>(p);
    case DType::kFloat16: return half_to_float(load_as<uint16_t>(p));
    case DType::kBFloat16: return bfloat16_to_float(load_as<uint16_t>(p));
    case DType::kInt32: return load_as<int32_t>(p);
    case DType::kInt64: return static_cast<double>(load_as<int64_t>(p));
    case DType::kUInt8: return load_as<uint8_t>(p);
    case DType::kInt8: return load_as<int8_t>(p);
    case DType::kInt16: return load_as<int16_t>(p);
  }
  KOLO_THROW(ErrorCode::kInvalidArgument, "convert: unknown dtype ", static_cast<int>(dtype));
}

// Truncation toward zero as static_cast does, but defined for every input: out-of-range values
// saturate and NaN gives 0 (the cast would be undefined behaviour).
template <typename I>
I to_integer(double v) {
  constexpr I kMin = std::numeric_limits<I>::min(), kMax = std::numeric_limits<I>::max();
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(kMin)) return kMin;
  // kMax as a double may round up (to 2^63 for int64), so >= saturates exactly what cannot fit.
  if (v >= static_cast<double>(kMax)) return kMax;
  return static_cast<I>(v);
}

void store_double(DType dtype, uint8_t* p, double v) {
  switch (dtype) {
    case DType::kFloat32: return store_as(p, static_cast<float>(v));
    case DType::kFloat64: return store_as(p, v);
    case DType::kFloat16: return store_as(p, float_to_half(static_cast<float>(v)));
    case DType::kBFloat16: return store_as(p, float_to_bfloat16(static_cast<float>(v)));
    case DType::kInt32: return store_as(p, to_integer<int32_t>(v));
    case DType::kInt64: return store_as(p, to_integer<int64_t>(v));
    case DType::kUInt8: return store_as(p, to_integer<uint8_t>(v));
    case DType::kInt8: return store_as(p, to_integer<int8_t>(v));
    case DType::kInt16: return store_as(p, to_integer<int16_t>(v));
  }
  KOLO_THROW(ErrorCode::kInvalidArgument, "convert: unknown dtype ", static_cast<int>(dtype));
}

void convert_doubles(uint8_t* dst, DType to, const uint8_t* src, DType from, size_t n,
                     double scale) {
  const size_t from_size = dtype_size(from), to_size = dtype_size(to);
  for (size_t i = 0; i < n; ++i)
    store_double(to, dst + i * to_size, load_double(from, src + i * from_size) * scale);
}

void convert_with(const KernelTable& table, void* dst, DType to, const void* src, DType from,
                  size_t count, double scale) {
  if (count == 0) return;
  KOLO_CHECK_ARG(dst != nullptr && src != nullptr, "convert: null buffer for ", count, " ",
                 dtype_name(from), " -> ", dtype_name(to), " elements");
  if (to == from && scale == 1.0) {
    std::memmove(dst, src, count * dtype_size(to));
    return;
  }
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  const int f = float_index(from), t = float_index(to);
  if (f >= 0 && t >= 0) {
    table.kernel[f][t](d, s, count, static_cast<float>(scale));
  } else {
    convert_doubles(d, to, s, from, count, scale);
  }
}

}  // namespace

void convert(void* dst, DType to, const void* src, DType from, size_t count, double scale) {
  convert_with(best_kernels(), dst, to, src, from, count, scale);
}

void convert_scalar(void* dst, DType to, const void* src, DType from, size_t count, double scale) {
  convert_with(kScalarKernels, dst, to, src, from, count, scale);
}

bool convert_is_vectorized() {
  return cpu_has_avx2_f16c();
}

}  // namespace kolo
