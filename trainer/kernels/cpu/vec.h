// Internal to the CPU kernels (compiled with -mavx2 -mfma -mf16c): storage codecs that load
// 8 elements of a storage dtype as fp32 lanes and store them back rounded to nearest even,
// the dtype dispatch every kernel goes through, and the grow-only fp32 scratch buffers.
// The codecs exist so kernels can convert inside their registers; they round exactly as
// kolo's one conversion module, comm/base/convert.h, whose helpers serve one element at a time
// (array conversions call kolo::convert itself).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "comm/base/convert.h"
#include "comm/base/dtype.h"
#include "comm/base/error.h"
#include "trainer/kernels/backend.h"
#include "trainer/kernels/cpu/parallel.h"

namespace kolo::trainer::cpu {

inline constexpr int kLanes = 8;

// fp32 storage: plain unaligned moves.
struct F32 {
  using T = float;
  static constexpr DType kDType = DType::kFloat32;
  static __m256 load(const T* p) { return _mm256_loadu_ps(p); }
  static void store(T* p, __m256 v) { _mm256_storeu_ps(p, v); }
  static float load1(const T* p) { return *p; }
  static void store1(T* p, float v) { *p = v; }
};

// fp16 storage: F16C converts exactly on load and rounds to nearest even on store (subnormals,
// overflow to infinity and quiet NaNs included), bit for bit as kolo::float_to_half.
struct F16 {
  using T = uint16_t;
  static constexpr DType kDType = DType::kFloat16;
  static constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  static __m256 load(const T* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store(T* p, __m256 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, kRound));
  }
  static float load1(const T* p) { return half_to_float(*p); }
  static void store1(T* p, float v) { *p = float_to_half(v); }
};

// bf16 storage: the upper half of an fp32. Stores round to nearest even by adding 0x7FFF plus
// the lowest kept bit; NaNs are truncated and made quiet (as kolo::float_to_bfloat16).
struct BF16 {
  using T = uint16_t;
  static constexpr DType kDType = DType::kBFloat16;
  static __m256 load(const T* p) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static __m256i round(__m256 v) {
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    const __m256i rounded =
        _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF)));
    const __m256i quiet = _mm256_or_si256(bits, _mm256_set1_epi32(0x00400000));
    const __m256 is_nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    const __m256 chosen =
        _mm256_blendv_ps(_mm256_castsi256_ps(rounded), _mm256_castsi256_ps(quiet), is_nan);
    return _mm256_srli_epi32(_mm256_castps_si256(chosen), 16);
  }
  static void store(T* p, __m256 v) {
    const __m256i r = round(v);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
  }
  static float load1(const T* p) { return bfloat16_to_float(*p); }
  static void store1(T* p, float v) { *p = float_to_bfloat16(v); }
};

// The first n < 8 elements as a vector (the rest 0), and the matching partial store: every
// kernel runs one vector loop whose last iteration is partial instead of a scalar tail.
template <typename S>
__m256 load_part(const typename S::T* p, size_t n) {
  typename S::T tmp[kLanes] = {};
  std::memcpy(tmp, p, n * sizeof(typename S::T));
  return S::load(tmp);
}
template <typename S>
void store_part(typename S::T* p, __m256 v, size_t n) {
  typename S::T tmp[kLanes];
  S::store(tmp, v);
  std::memcpy(p, tmp, n * sizeof(typename S::T));
}
template <typename S>
__m256 load_n(const typename S::T* p, size_t n) {
  return n >= kLanes ? S::load(p) : load_part<S>(p, n);
}
template <typename S>
void store_n(typename S::T* p, __m256 v, size_t n) {
  if (n >= kLanes) {
    S::store(p, v);
  } else {
    store_part<S>(p, v, n);
  }
}

// All ones in the first n lanes (n < 8), zero above: masks the padding of a partial load.
inline __m256 lane_mask(size_t n) {
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), index));
}

// Runs fn(S{}) for the storage dtype; any other dtype is an invalid argument naming the kernel.
template <typename Fn>
decltype(auto) dispatch(DType dt, const char* kernel, Fn&& fn) {
  switch (dt) {
    case DType::kFloat32: return fn(F32{});
    case DType::kFloat16: return fn(F16{});
    case DType::kBFloat16: return fn(BF16{});
    default: break;
  }
  KOLO_THROW(ErrorCode::kInvalidArgument, kernel, ": unsupported storage dtype ", dtype_name(dt),
             " (accepted: ", kStorageDTypeNames, ")");
}

template <typename S>
const typename S::T* as(const void* p) {
  return static_cast<const typename S::T*>(p);
}
template <typename S>
typename S::T* as(void* p) {
  return static_cast<typename S::T*>(p);
}

// Per-thread fp32 scratch, one buffer per slot, grown on demand and never shrunk, so the
// steady state allocates nothing. A kernel uses distinct slots for buffers live at once.
enum class Slot : int { kA, kB, kC, kD, kE, kF, kG, kH, kCount };
float* scratch(Slot slot, size_t n);

// f(i, left) for i = 0, kLanes, 2 kLanes, ... < n, `left` the elements from i to the end of
// its range (a full vector except at the very end): the element-wise loop of the kernels, its
// ranges split across the kernel pool in blocks of `grain` (a multiple of kLanes; inline inside
// a pool's range).
template <typename F>
void for_each_vector(size_t n, size_t grain, F f) {
  parallel_for(n, grain, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; i += kLanes) f(i, end - i);
  });
}

// Widens n storage elements into the fp32 scratch of `slot` (a copy, also for F32).
constexpr size_t kConvertGrain = 32768;
template <typename S>
float* widen(Slot slot, const typename S::T* src, size_t n) {
  float* dst = scratch(slot, n);
  for_each_vector(n, kConvertGrain, [&](size_t i, size_t left) {
    store_n<F32>(dst + i, load_n<S>(src + i, left), left);
  });
  return dst;
}
// The fp32 view of n storage elements: src itself for F32, else widened into `slot`.
template <typename S>
const float* to_f32(Slot slot, const typename S::T* src, size_t n) {
  if constexpr (S::kDType == DType::kFloat32) {
    return src;
  } else {
    return widen<S>(slot, src, n);
  }
}
// Stores n fp32 values into storage, rounding once.
template <typename S>
void from_f32(typename S::T* dst, const float* src, size_t n) {
  for_each_vector(n, kConvertGrain, [&](size_t i, size_t left) {
    store_n<S>(dst + i, load_n<F32>(src + i, left), left);
  });
}

// Sum of the 8 lanes.
inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}
inline float hmax(__m256 v) {
  const __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(t, _mm_movehdup_ps(t)));
}

}  // namespace kolo::trainer::cpu
