// Inputs that the fuzz targets (tests/fuzz/, scripts/fuzz.sh) found to break the trainer's
// parsers, kept as tests once fixed. Those of comm and fusion are in
// tests/unit/fuzz_regressions_test.cc.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "comm/base/error.h"
#include "trainer/config/train_config.h"

namespace kolo::trainer {
namespace {

// fuzz_config: a number too large for a double made nlohmann-json throw out_of_range (406),
// which read_config_file let through instead of its kInvalidArgument.
TEST(FuzzRegressions, ConfigNumberOverflowIsInvalidArgument) {
  const std::string path = ::testing::TempDir() + "kolo_fuzz_regression_config.json";
  std::ofstream(path) << R"({"optimizer": {"params": {"lr": 55E550}}})";
  try {
    read_config_file(path);
    ADD_FAILURE() << "no kolo::Error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

// fuzz_config: an override that is not UTF-8 was stored as a string that nlohmann-json cannot
// write (type_error 316): the config then failed to dump into the first checkpoint's index,
// and validation messages that print the value threw type_error instead of kolo::Error.
TEST(FuzzRegressions, ConfigOverrideMustBeUtf8) {
  for (const char* bad : {"kolo.note=caf\xe9", "kolo.caf\xe9=1", "fp16.enabled=\xff"}) {
    nlohmann::json config = nlohmann::json::object();
    try {
      apply_override(config, bad);
      ADD_FAILURE() << "no kolo::Error thrown for " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("not valid UTF-8"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW((void)config.dump());
  }
  nlohmann::json config = nlohmann::json::object();
  apply_override(config, "kolo.note=caf\xc3\xa9");  // UTF-8 is kept
  EXPECT_EQ(config["kolo"]["note"], "caf\xc3\xa9");
}

}  // namespace
}  // namespace kolo::trainer
