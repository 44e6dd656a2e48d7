// Pack / unpack with scale and cast. Fast paths: plain copies, scaled fp32, and fp32 <-> fp16
// with F16C (chosen at run time); everything else goes element by element through double.
#include "fusion/pack.h"

#include <immintrin.h>

#include <cstdlib>
#include <cstring>

#include "comm/base/error.h"
#include "comm/reduce/reduce.h"

namespace kolo::fusion {
namespace {

double load(DType dtype, const void* p, size_t i) {
  switch (dtype) {
    case DType::kFloat32: return static_cast<const float*>(p)[i];
    case DType::kFloat64: return static_cast<const double*>(p)[i];
    case DType::kFloat16: return reduce::half_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kBFloat16: return reduce::bfloat16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kInt32: return static_cast<const int32_t*>(p)[i];
    case DType::kInt64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::kUInt8: return static_cast<const uint8_t*>(p)[i];
  }
  return 0;
}

void store(DType dtype, void* p, size_t i, double v) {
  switch (dtype) {
    case DType::kFloat32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::kFloat64: static_cast<double*>(p)[i] = v; break;
    case DType::kFloat16:
      static_cast<uint16_t*>(p)[i] = reduce::float_to_half(static_cast<float>(v));
      break;
    case DType::kBFloat16:
      static_cast<uint16_t*>(p)[i] = reduce::float_to_bfloat16(static_cast<float>(v));
      break;
    case DType::kInt32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case DType::kInt64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
    case DType::kUInt8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); break;
  }
}

bool has_f16c() {
  static const bool yes = reduce::best_isa() != reduce::Isa::kScalar;  // AVX2 implies F16C here
  return yes;
}

__attribute__((target("avx2,f16c"))) void float_to_half_f16c(uint16_t* dst, const float* src,
                                                             size_t n, float scale) {
  const __m256 s = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(src + i), s);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) dst[i] = reduce::float_to_half(src[i] * scale);
}

__attribute__((target("avx2,f16c"))) void half_to_float_f16c(float* dst, const uint16_t* src,
                                                             size_t n, float scale) {
  const __m256 s = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_mul_ps(v, s));
  }
  for (; i < n; ++i) dst[i] = reduce::half_to_float(src[i]) * scale;
}

void scale_floats(float* dst, const float* src, size_t n, float scale) {
  for (size_t i = 0; i < n; ++i) dst[i] = src[i] * scale;  // vectorised by the compiler
}

bool convert_fast(void* dst, DType to, const void* src, DType from, size_t n, double scale) {
  if (to == from && scale == 1.0) {
    std::memcpy(dst, src, n * dtype_size(to));
    return true;
  }
  if (to == DType::kFloat32 && from == DType::kFloat32) {
    scale_floats(static_cast<float*>(dst), static_cast<const float*>(src), n,
                 static_cast<float>(scale));
    return true;
  }
  if (!has_f16c()) return false;
  if (to == DType::kFloat16 && from == DType::kFloat32) {
    float_to_half_f16c(static_cast<uint16_t*>(dst), static_cast<const float*>(src), n,
                       static_cast<float>(scale));
    return true;
  }
  if (to == DType::kFloat32 && from == DType::kFloat16) {
    half_to_float_f16c(static_cast<float*>(dst), static_cast<const uint16_t*>(src), n,
                       static_cast<float>(scale));
    return true;
  }
  return false;
}

void convert(void* dst, DType to, const void* src, DType from, size_t n, double scale) {
  if (n == 0 || convert_fast(dst, to, src, from, n, scale)) return;
  for (size_t i = 0; i < n; ++i) store(to, dst, i, load(from, src, i) * scale);
}

}  // namespace

void pack(void* dst, DType wire, const void* src, DType dtype, size_t count, double scale) {
  convert(dst, wire, src, dtype, count, scale);
}

void unpack(void* dst, DType dtype, const void* src, DType wire, size_t count, double scale) {
  convert(dst, dtype, src, wire, count, scale);
}

void FusionBuffer::Free::operator()(char* p) const {
  std::free(p);
}

char* FusionBuffer::reserve(size_t bytes) {
  if (bytes > capacity_) {
    size_t grown = align_up(std::max(bytes, capacity_ * 2));
    char* p = static_cast<char*>(std::aligned_alloc(kFusionAlignment, grown));
    KOLO_CHECK_ARG(p != nullptr, "cannot allocate a fusion buffer of ", grown, " bytes");
    data_.reset(p);
    capacity_ = grown;
  }
  return data_.get();
}

}  // namespace kolo::fusion
