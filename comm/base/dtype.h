// Element types of the tensors kolo moves, their sizes and names, and the parser used for
// environment variables and command-line flags.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kolo {

// New dtypes go at the end: the values travel in wire messages and are kept in checkpoints.
enum class DType : uint8_t {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt32,
  kInt64,
  kUInt8,
  kInt8,
  kInt16,
};
inline constexpr DType kLastDType = DType::kInt16;
inline constexpr int kNumDTypes = static_cast<int>(kLastDType) + 1;

[[noreturn]] void throw_unknown_dtype(DType dtype);  // kInvalidArgument naming the value

// Inline: the engine and the collectives ask per tensor and per chunk.
inline size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kInt32: return 4;
    case DType::kFloat64:
    case DType::kInt64: return 8;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16: return 2;
    case DType::kUInt8:
    case DType::kInt8: return 1;
  }
  throw_unknown_dtype(dtype);
}
inline bool is_floating(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 ||
         dtype == DType::kBFloat16;
}
const char* dtype_name(DType dtype);  // "float32", "float16", ...

// Accepts the names above and common aliases (fp32, half, bf16, ...). `setting` names where
// the text came from, for the error message.
DType parse_dtype(std::string_view text, std::string_view setting);

}  // namespace kolo
