// The device packer's host-side rules (fusion/cuda/convert.h): which conversions run as the
// kernel, which as a plain device copy, and which are refused before anything is launched.
// Needs no device; the kernels themselves are checked by tests/gpu (scripts/gpu_check.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "comm/base/error.h"
#include "fusion/cuda/convert.h"

namespace kolo::fusion::cuda {
namespace {

TEST(DevicePack, FloatTypesConvertEitherWayAtAnyFiniteScale) {
  for (DType from : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (DType to : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
      for (double scale : {1.0, 0.125, -3.0, 0.0})
        EXPECT_EQ(convert_path(from, to, scale), ConvertPath::kKernel)
            << dtype_name(from) << " -> " << dtype_name(to) << " x " << scale;
}

TEST(DevicePack, OtherDtypesOnlyCopyToThemselvesAtScaleOne) {
  for (DType d : {DType::kInt32, DType::kInt64, DType::kUInt8, DType::kFloat64})
    EXPECT_EQ(convert_path(d, d, 1.0), ConvertPath::kCopy) << dtype_name(d);
  try {
    convert_path(DType::kInt32, DType::kInt32, 0.5);
    FAIL() << "a scaled int32 pack was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("int32 to int32 at scale 0.5"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(convert_path(DType::kFloat64, DType::kFloat32, 1.0), Error);
  EXPECT_THROW(convert_path(DType::kFloat32, DType::kInt8, 1.0), Error);
}

TEST(DevicePack, NonFiniteScalesAreRefused) {
  for (double scale :
       {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()})
    EXPECT_THROW(convert_path(DType::kFloat32, DType::kFloat16, scale), Error) << scale;
}

}  // namespace
}  // namespace kolo::fusion::cuda
