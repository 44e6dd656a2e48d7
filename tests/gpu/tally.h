// The check tally of kolo's GPU test programs (plain programs: the device image has no test
// framework): expect() counts a check and prints the first failures; summary() prints
// "<program>: N checks, M failed" (the line scripts/gpu_check.sh collects) and gives the exit
// status.
#pragma once

#include <cstdio>
#include <string>

namespace kolo::gpu_test {

inline int checks = 0, failures = 0;

inline void expect(bool good, const std::string& what) {
  ++checks;
  if (!good && ++failures <= 30) std::printf("FAILED: %s\n", what.c_str());
}

inline int summary(const char* program) {
  std::printf("%s: %d checks, %d failed\n", program, checks, failures);
  return failures == 0 ? 0 : 1;
}

}  // namespace kolo::gpu_test
