// Sizes, names and the parser of DType.
#include "comm/base/dtype.h"

#include <iterator>

#include "comm/base/names.h"

namespace kolo {

void throw_unknown_dtype(DType dtype) {
  KOLO_THROW(ErrorCode::kInvalidArgument, "unknown dtype ", static_cast<int>(dtype));
}

const char* dtype_name(DType dtype) {
  static const char* const kNames[] = {"float32", "float64", "float16", "bfloat16", "int32",
                                       "int64",   "uint8",   "int8",    "int16"};
  static_assert(static_cast<int>(std::size(kNames)) == kNumDTypes, "a name for every dtype");
  return detail::enum_name(kNames, dtype, "dtype");
}

DType parse_dtype(std::string_view text, std::string_view setting) {
  static const std::array<std::pair<const char*, DType>, 16> kTable{{{"float32", DType::kFloat32},
                                                                     {"fp32", DType::kFloat32},
                                                                     {"float", DType::kFloat32},
                                                                     {"float64", DType::kFloat64},
                                                                     {"fp64", DType::kFloat64},
                                                                     {"double", DType::kFloat64},
                                                                     {"float16", DType::kFloat16},
                                                                     {"fp16", DType::kFloat16},
                                                                     {"half", DType::kFloat16},
                                                                     {"bfloat16", DType::kBFloat16},
                                                                     {"bf16", DType::kBFloat16},
                                                                     {"int32", DType::kInt32},
                                                                     {"int64", DType::kInt64},
                                                                     {"uint8", DType::kUInt8},
                                                                     {"int8", DType::kInt8},
                                                                     {"int16", DType::kInt16}}};
  return detail::parse_name(text, setting, "dtype", kTable);
}

}  // namespace kolo
