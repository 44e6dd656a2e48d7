// Closed-form test values and typed buffer access.
#include "tests/common/values.h"

#include <algorithm>
#include <cstring>

#include "comm/base/convert.h"
#include "comm/base/reduce_op.h"

namespace kolo::testing {

double input_value(DType dtype, ReduceOp op, int rank, size_t i) {
  if (op == ReduceOp::kProduct) return ((i + static_cast<size_t>(rank)) % 4 == 0) ? 2.0 : 1.0;
  double base = static_cast<double>((static_cast<size_t>(rank) * 13 + i * 7) % 15 + 1);  // 1..15
  if (dtype == DType::kUInt8) return base;
  double value = base - 8.0;  // -7..7: exercises signs
  if (is_floating(dtype)) value += 0.5 * (rank % 2);
  return value;
}

double expected_value(DType dtype, ReduceOp op, int size, size_t i) {
  double acc = input_value(dtype, op, 0, i);
  for (int r = 1; r < size; ++r) {
    double v = input_value(dtype, op, r, i);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage: acc += v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
      case ReduceOp::kProduct: acc *= v; break;
      // Small whole numbers: exact as int64, whose two's complement the narrow types share.
      case ReduceOp::kBand: acc = static_cast<double>(int64_t(acc) & int64_t(v)); break;
      case ReduceOp::kBor: acc = static_cast<double>(int64_t(acc) | int64_t(v)); break;
      case ReduceOp::kBxor: acc = static_cast<double>(int64_t(acc) ^ int64_t(v)); break;
    }
  }
  if (op != ReduceOp::kAverage) return acc;
  if (is_floating(dtype)) return acc / size;
  return std::trunc(acc / size);  // C++ integer division truncates toward zero
}

std::vector<char> input_pattern(DType dtype, ReduceOp op, int rank) {
  auto pattern = make_buffer(dtype, kValuePeriod);
  for (size_t i = 0; i < kValuePeriod; ++i)
    store(dtype, pattern.data(), i, input_value(dtype, op, rank, i));
  return pattern;
}

std::vector<char> expected_pattern(DType dtype, ReduceOp op, int size) {
  auto pattern = make_buffer(dtype, kValuePeriod);
  for (size_t i = 0; i < kValuePeriod; ++i)
    store(dtype, pattern.data(), i, expected_value(dtype, op, size, i));
  return pattern;
}

// Walks [0, count) in runs that stay within one period of the pattern.
template <typename Fn>
void for_each_run(size_t count, size_t phase, Fn fn) {
  for (size_t i = 0; i < count;) {
    size_t at = (phase + i) % kValuePeriod;
    size_t run = std::min(kValuePeriod - at, count - i);
    if (!fn(i, at, run)) return;
    i += run;
  }
}

void tile(DType dtype, void* data, size_t count, const std::vector<char>& pattern, size_t phase) {
  const size_t esize = dtype_size(dtype);
  char* out = static_cast<char*>(data);
  for_each_run(count, phase, [&](size_t i, size_t at, size_t run) {
    std::memcpy(out + i * esize, pattern.data() + at * esize, run * esize);
    return true;
  });
}

size_t first_mismatch(DType dtype, const void* data, size_t count, const std::vector<char>& pattern,
                      size_t phase) {
  const size_t esize = dtype_size(dtype);
  const char* in = static_cast<const char*>(data);
  size_t found = count;
  for_each_run(count, phase, [&](size_t i, size_t at, size_t run) {
    if (std::memcmp(in + i * esize, pattern.data() + at * esize, run * esize) == 0) return true;
    for (size_t k = 0; k < run; ++k)
      if (std::memcmp(in + (i + k) * esize, pattern.data() + (at + k) * esize, esize) != 0) {
        found = i + k;
        break;
      }
    return false;
  });
  return found;
}

double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return std::ldexp(1.0, -24);
    case DType::kFloat64: return std::ldexp(1.0, -53);
    case DType::kFloat16: return std::ldexp(1.0, -11);
    case DType::kBFloat16: return std::ldexp(1.0, -8);
    default: return 0.0;
  }
}

double tolerance(DType dtype, ReduceOp op, double expected) {
  if (op != ReduceOp::kAverage || !is_floating(dtype)) return 0.0;
  return 2.0 * unit_roundoff(dtype) * std::fabs(expected) + 1e-300;
}

double random_value(DType dtype, uint64_t seed, int rank, size_t i) {
  uint64_t x = seed ^ (static_cast<uint64_t>(rank) << 40) ^ (i * 0x9e3779b97f4a7c15ull);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  double u = static_cast<double>(x >> 11) * std::ldexp(1.0, -53) * 2.0 - 1.0;
  uint64_t one = 0;
  store(dtype, &one, 0, u);  // round to what the dtype can hold
  return load(dtype, &one, 0);
}

double load(DType dtype, const void* data, size_t i) {
  switch (dtype) {
    case DType::kFloat32: return static_cast<const float*>(data)[i];
    case DType::kFloat64: return static_cast<const double*>(data)[i];
    case DType::kFloat16: return half_to_float(static_cast<const uint16_t*>(data)[i]);
    case DType::kBFloat16: return bfloat16_to_float(static_cast<const uint16_t*>(data)[i]);
    case DType::kInt32: return static_cast<const int32_t*>(data)[i];
    case DType::kInt64: return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case DType::kUInt8: return static_cast<const uint8_t*>(data)[i];
    case DType::kInt8: return static_cast<const int8_t*>(data)[i];
    case DType::kInt16: return static_cast<const int16_t*>(data)[i];
  }
  return 0;
}

void store(DType dtype, void* data, size_t i, double value) {
  switch (dtype) {
    case DType::kFloat32: static_cast<float*>(data)[i] = static_cast<float>(value); break;
    case DType::kFloat64: static_cast<double*>(data)[i] = value; break;
    case DType::kFloat16:
      static_cast<uint16_t*>(data)[i] = float_to_half(static_cast<float>(value));
      break;
    case DType::kBFloat16:
      static_cast<uint16_t*>(data)[i] = float_to_bfloat16(static_cast<float>(value));
      break;
    case DType::kInt32: static_cast<int32_t*>(data)[i] = static_cast<int32_t>(value); break;
    case DType::kInt64: static_cast<int64_t*>(data)[i] = static_cast<int64_t>(value); break;
    case DType::kUInt8: static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(value); break;
    case DType::kInt8: static_cast<int8_t*>(data)[i] = static_cast<int8_t>(value); break;
    case DType::kInt16: static_cast<int16_t*>(data)[i] = static_cast<int16_t>(value); break;
  }
}

std::vector<char> make_buffer(DType dtype, size_t count) {
  return std::vector<char>(count * dtype_size(dtype) + 1, '\x5a');  // +1: never a null data()
}

uint64_t fnv1a(const void* data, size_t bytes, uint64_t hash) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 1099511628211ull;
  return hash;
}

}  // namespace kolo::testing
