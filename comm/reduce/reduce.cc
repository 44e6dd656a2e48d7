// The public face of the reduction kernels: picks the instruction set (CPU features, lowered by
// KOLO_REDUCE_ISA), checks arguments and dispatches to the scalar, AVX2 or AVX-512 kernels in
// kernels.h.
#include "comm/reduce/reduce.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>

#include "comm/base/convert.h"
#include "comm/base/env.h"
#include "comm/base/error.h"
#include "comm/base/reduce_op.h"
#include "comm/reduce/kernels.h"

namespace kolo::reduce {
namespace {

constexpr const char* kIsaVariable = "KOLO_REDUCE_ISA";
constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512};
// active_isa() before anything chose one: resolved from best_isa() on first use, not at load
// time, so a bad KOLO_REDUCE_ISA surfaces as an exception from a kolo call, not at startup.
constexpr int kUnresolved = -1;

std::atomic<int> g_active_isa{kUnresolved};

#if defined(__x86_64__) || defined(__i386__)
// F16C straight from CPUID: not every compiler's __builtin_cpu_supports knows the name. The
// OS support it needs (saved YMM registers) is the same as AVX2's, checked below.
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

// What the CPU and OS support, ignoring KOLO_REDUCE_ISA. __builtin_cpu_supports also checks
// that the OS saves the wider registers (XCR0), not just the CPUID bits.
Isa detect_hardware_isa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();  // needed if we run before libgcc's own constructor
  const bool avx2 =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512dq");
  if (avx512) return Isa::kAvx512;
  if (avx2) return Isa::kAvx2;
#endif
  return Isa::kScalar;
}

Isa hardware_isa() {
  static const Isa isa = detect_hardware_isa();
  return isa;
}

bool hardware_has(Isa isa) {
  return static_cast<int>(isa) <= static_cast<int>(hardware_isa());
}

// "scalar, avx2" for a CPU with AVX2 but not AVX-512.
std::string supported_names() {
  std::string names;
  for (Isa isa : kAllIsas) {
    if (!hardware_has(isa)) break;
    names += names.empty() ? isa_name(isa) : std::string(", ") + isa_name(isa);
  }
  return names;
}

void check_hardware_has(Isa isa) {
  KOLO_CHECK_ARG(static_cast<size_t>(isa) < std::size(kAllIsas), "unknown reduce ISA ",
                 static_cast<int>(isa));
  KOLO_CHECK_ARG(hardware_has(isa), "reduce ISA ", isa_name(isa),
                 " is not supported by this CPU; supported: ", supported_names());
}

// The kernels read a[i] and b[i] before writing dst[i], so dst == a or dst == b is fine, but a
// partial overlap would read elements already overwritten: reject it rather than return
// silently wrong sums.
void check_no_partial_overlap(const void* dst, const void* src, size_t bytes) {
  if (dst == src) return;
  const auto d = reinterpret_cast<uintptr_t>(dst);
  const auto s = reinterpret_cast<uintptr_t>(src);
  KOLO_CHECK_ARG(d + bytes <= s || s + bytes <= d,
                 "combine: dst partially overlaps an input (it may only equal a or b exactly)");
}

// Argument checks shared by combine() and combine_with(); false when there is nothing to do.
bool check_combine(void* dst, const void* a, const void* b, size_t count, DType dtype,
                   ReduceOp op) {
  check_op_and_dtype(op, dtype, "combine");
  if (count == 0) return false;  // null pointers are fine then
  KOLO_CHECK_ARG(dst != nullptr && a != nullptr && b != nullptr, "combine: null buffer with count ",
                 count);
  const size_t bytes = count * dtype_size(dtype);
  check_no_partial_overlap(dst, a, bytes);
  check_no_partial_overlap(dst, b, bytes);
  return true;
}

void dispatch(Isa isa, void* dst, const void* a, const void* b, size_t count, DType dtype,
              ReduceOp op) {
  switch (isa) {
    case Isa::kAvx512: return avx512::combine(dst, a, b, count, dtype, op);
    case Isa::kAvx2: return avx2::combine(dst, a, b, count, dtype, op);
    case Isa::kScalar: return scalar::combine(dst, a, b, count, dtype, op);
  }
  KOLO_THROW(ErrorCode::kInternal, "unknown reduce ISA ", static_cast<int>(isa));
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "unknown";
}

Isa best_isa() {
  const Isa hardware = hardware_isa();
  const auto setting = env::get(kIsaVariable);
  if (!setting) return hardware;
  std::string wanted = *setting;
  std::transform(wanted.begin(), wanted.end(), wanted.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (Isa isa : kAllIsas) {
    if (wanted != isa_name(isa)) continue;
    // The variable may only lower the choice: forcing an ISA the CPU lacks would crash.
    KOLO_CHECK_ARG(hardware_has(isa), kIsaVariable, "='", *setting,
                   "' is not supported by this CPU; accepted here: ", supported_names());
    return isa;
  }
  KOLO_THROW(ErrorCode::kInvalidArgument, kIsaVariable, "='", *setting,
             "' is not accepted; expected one of scalar, avx2, avx512 (this CPU supports: ",
             supported_names(), ")");
}

Isa active_isa() {
  int current = g_active_isa.load(std::memory_order_relaxed);
  if (current == kUnresolved) [[unlikely]] {
    current = static_cast<int>(best_isa());
    int expected = kUnresolved;
    // If set_active_isa() got there first, its choice stands.
    if (!g_active_isa.compare_exchange_strong(expected, current, std::memory_order_relaxed)) {
      current = expected;
    }
  }
  return static_cast<Isa>(current);
}

void set_active_isa(Isa isa) {
  check_hardware_has(isa);
  g_active_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
}

void combine(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op) {
  if (!check_combine(dst, a, b, count, dtype, op)) return;
  dispatch(active_isa(), dst, a, b, count, dtype, op);  // active_isa() is always supported
}

void combine_with(Isa isa, void* dst, const void* a, const void* b, size_t count, DType dtype,
                  ReduceOp op) {
  check_hardware_has(isa);
  if (!check_combine(dst, a, b, count, dtype, op)) return;
  dispatch(isa, dst, a, b, count, dtype, op);
}

namespace {

template <typename T>
T integer_identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProduct: return T{1};
    case ReduceOp::kMin: return std::numeric_limits<T>::max();
    case ReduceOp::kMax: return std::numeric_limits<T>::lowest();
    case ReduceOp::kBand: return static_cast<T>(~T{0});
    default: return T{0};
  }
}

template <typename T>
void fill_with(void* data, size_t count, T value) {
  std::fill_n(static_cast<T*>(data), count, value);
}

}  // namespace

void fill_identity(void* data, size_t count, DType dtype, ReduceOp op) {
  check_op_and_dtype(op, dtype, "fill_identity");
  if (count == 0) return;
  KOLO_CHECK_ARG(data != nullptr, "fill_identity: null buffer with count ", count);
  if (is_floating(dtype)) {
    const double inf = std::numeric_limits<double>::infinity();
    // -0 for a sum: x + -0 is x for every x, -0 included (-0 + +0 is +0).
    const double value = op == ReduceOp::kProduct ? 1.0
                         : op == ReduceOp::kMin   ? inf
                         : op == ReduceOp::kMax   ? -inf
                                                  : -0.0;
    // One element in the dtype's bits (fp16 and bf16 through kolo's conversion), repeated.
    const size_t size = dtype_size(dtype);
    unsigned char bits[sizeof(double)];
    convert(bits, dtype, &value, DType::kFloat64, 1);
    for (size_t i = 0; i < count; ++i) std::memcpy(static_cast<char*>(data) + i * size, bits, size);
    return;
  }
  switch (dtype) {
    case DType::kInt32: return fill_with(data, count, integer_identity<int32_t>(op));
    case DType::kInt64: return fill_with(data, count, integer_identity<int64_t>(op));
    case DType::kUInt8: return fill_with(data, count, integer_identity<uint8_t>(op));
    case DType::kInt8: return fill_with(data, count, integer_identity<int8_t>(op));
    case DType::kInt16: return fill_with(data, count, integer_identity<int16_t>(op));
    default: throw_unknown_dtype(dtype);
  }
}

void finish_average(void* data, size_t count, DType dtype, int divisor) {
  KOLO_CHECK_ARG(static_cast<int>(dtype) < kNumDTypes, "unknown dtype ", static_cast<int>(dtype));
  KOLO_CHECK_ARG(divisor > 0, "finish_average: divisor must be positive, got ", divisor);
  if (count == 0) return;
  KOLO_CHECK_ARG(data != nullptr, "finish_average: null buffer with count ", count);
  switch (active_isa()) {
    case Isa::kAvx512: return avx512::finish_average(data, count, dtype, divisor);
    case Isa::kAvx2: return avx2::finish_average(data, count, dtype, divisor);
    case Isa::kScalar: return scalar::finish_average(data, count, dtype, divisor);
  }
}

void combine_average(void* dst, const void* a, const void* b, size_t count, DType dtype,
                     int divisor) {
  KOLO_CHECK_ARG(divisor > 0, "combine_average: divisor must be positive, got ", divisor);
  if (!check_combine(dst, a, b, count, dtype, ReduceOp::kSum)) return;
  switch (active_isa()) {
    case Isa::kAvx512: return avx512::combine_average(dst, a, b, count, dtype, divisor);
    case Isa::kAvx2: return avx2::combine_average(dst, a, b, count, dtype, divisor);
    case Isa::kScalar:
      scalar::combine(dst, a, b, count, dtype, ReduceOp::kSum);
      return scalar::finish_average(dst, count, dtype, divisor);
  }
}

}  // namespace kolo::reduce
