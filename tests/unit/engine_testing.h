// What the engine tests share: the engine's names, and options under which a test that stalls
// fails within seconds instead of the engine's defaults (a 60 s warning, no shutdown).
#pragma once

#include <gtest/gtest.h>

#include <chrono>

#include "fusion/engine.h"
#include "tests/unit/thread_ranks.h"

namespace kolo::testing {

using namespace std::chrono_literals;
using engine::Engine;
using engine::EngineOptions;
using engine::Handle;
using engine::OpOptions;
using engine::TensorView;

// Stalls are reported after 5 s; with stall_shutdown_seconds > 0 the engine also shuts down
// that long after the report.
inline EngineOptions quick_options(double stall_shutdown_seconds = 0) {
  EngineOptions o;
  o.stall_check_seconds = 5;
  o.stall_shutdown_seconds = stall_shutdown_seconds;
  return o;
}

// The op's status once it is done (20 s at most).
inline engine::Status status_of(const Handle& h) {
  EXPECT_TRUE(h.wait(20s));
  return h.status();
}

}  // namespace kolo::testing
