// Minimal leveled logging to stderr, prefixed with the time and the rank. KOLO_LOG_LEVEL picks
// the threshold: trace, debug, info, warning (default), error, off.
#pragma once

#include <string>

#include "comm/base/error.h"

namespace kolo::log {

enum class Level { kTrace, kDebug, kInfo, kWarning, kError, kOff };

Level threshold();  // parsed once from KOLO_LOG_LEVEL
void set_threshold(Level level);
void set_rank(int rank);  // shown in every line once known
void write(Level level, const std::string& message);

}  // namespace kolo::log

#define KOLO_LOG(level, ...)                                                              \
  do {                                                                                    \
    if (::kolo::log::Level::level >= ::kolo::log::threshold())                            \
      ::kolo::log::write(::kolo::log::Level::level, ::kolo::detail::concat(__VA_ARGS__)); \
  } while (0)
