// The host half of the device converter: which path a conversion takes, checked before any
// launch (built with or without CUDA, so its rules are tested everywhere).
#include <cmath>

#include "comm/base/error.h"
#include "fusion/cuda/convert.h"

namespace kolo::fusion::cuda {
namespace {

bool is_float(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16;
}

}  // namespace

ConvertPath convert_path(DType from, DType to, double scale) {
  KOLO_CHECK_ARG(std::isfinite(scale), "device pack: scale ", scale, " is not finite");
  if (is_float(from) && is_float(to)) return ConvertPath::kKernel;
  KOLO_CHECK_ARG(from == to && scale == 1.0, "device pack: ", dtype_name(from), " to ",
                 dtype_name(to), " at scale ", scale,
                 " is not supported (float32, float16 and bfloat16 convert and scale between "
                 "each other; other dtypes only copy, at scale 1)");
  return ConvertPath::kCopy;
}

}  // namespace kolo::fusion::cuda
