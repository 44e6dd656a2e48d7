// error_of(fn, code): runs fn, expects a kolo::Error with `code`, returns its message (and
// records a test failure when nothing or something else is thrown).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "comm/base/error.h"

namespace kolo::testing {

template <typename Fn>
std::string error_of(Fn fn, ErrorCode code) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no kolo::Error thrown";
  return "";
}

}  // namespace kolo::testing
