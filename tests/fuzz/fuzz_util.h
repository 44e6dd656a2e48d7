// What the fuzz targets share: FUZZ_CHECK(cond), a property a target asserts (a failure prints
// the condition and aborts, which libFuzzer reports as a crash and saves the input), and
// as_file, for parsers that read a path.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#define FUZZ_CHECK(cond)                                                            \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

namespace kolo::fuzz {

// A path whose file holds `data`: one memfd per target, rewritten for each input.
inline std::string as_file(const void* data, size_t size) {
  static const int fd = memfd_create("kolo_fuzz", MFD_CLOEXEC);
  FUZZ_CHECK(fd >= 0 && ::ftruncate(fd, 0) == 0);
  FUZZ_CHECK(size == 0 || ::pwrite(fd, data, size, 0) == static_cast<ssize_t>(size));
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace kolo::fuzz
