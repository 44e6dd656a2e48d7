// KOLO_REDUCE_ISA and the ISA names: the variable may only lower the detected level, and a
// bad value is an error naming the variable, the value and the accepted names.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "comm/base/error.h"
#include "comm/reduce/reduce.h"
#include "tests/common/scoped_env.h"
#include "tests/unit/reduce_cpu.h"

namespace kolo::reduce {
namespace {

TEST(ReduceIsa, NamesAndDetection) {
  EXPECT_STREQ(isa_name(Isa::kScalar), "scalar");
  EXPECT_STREQ(isa_name(Isa::kAvx2), "avx2");
  EXPECT_STREQ(isa_name(Isa::kAvx512), "avx512");
  if (std::getenv("KOLO_REDUCE_ISA") == nullptr) {
    EXPECT_EQ(best_isa(), cpu_isa());
  }
  std::printf("CPU reduce ISA: %s\n", isa_name(cpu_isa()));
}

using testing::ScopedEnv;

TEST(ReduceIsa, EnvironmentVariableMayOnlyLower) {
  {
    ScopedEnv env("KOLO_REDUCE_ISA", nullptr);
    EXPECT_EQ(best_isa(), cpu_isa());
  }
  {
    ScopedEnv env("KOLO_REDUCE_ISA", "scalar");
    EXPECT_EQ(best_isa(), Isa::kScalar);
  }
  if (cpu_isa() != Isa::kScalar) {
    ScopedEnv env("KOLO_REDUCE_ISA", "AVX2");
    EXPECT_EQ(best_isa(), Isa::kAvx2);
  }
  {
    ScopedEnv env("KOLO_REDUCE_ISA", "sse9");
    try {
      best_isa();
      FAIL() << "expected kolo::Error";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      const std::string message = error.what();
      EXPECT_NE(message.find("KOLO_REDUCE_ISA"), std::string::npos) << message;
      EXPECT_NE(message.find("sse9"), std::string::npos) << message;
      EXPECT_NE(message.find("scalar, avx2, avx512"), std::string::npos) << message;
    }
  }
  if (cpu_isa() != Isa::kAvx512) {
    ScopedEnv env("KOLO_REDUCE_ISA", "avx512");
    try {
      best_isa();
      FAIL() << "expected kolo::Error";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(error.what()).find("KOLO_REDUCE_ISA"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace kolo::reduce
