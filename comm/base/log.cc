// Logging: one line per message, written with a single write(2) so that lines from several
// threads or ranks do not interleave.
#include "comm/base/log.h"

#include <strings.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>

#include "comm/base/env.h"

namespace kolo::log {
namespace {

std::atomic<int> g_rank{-1};

Level parse_level() {
  auto text = env::get("KOLO_LOG_LEVEL");
  if (!text) return Level::kWarning;
  static const char* const kNames[] = {"trace", "debug", "info", "warning", "error", "off"};
  for (int i = 0; i < 6; ++i)
    if (strcasecmp(text->c_str(), kNames[i]) == 0) return static_cast<Level>(i);
  KOLO_THROW(ErrorCode::kInvalidArgument, "KOLO_LOG_LEVEL='", *text,
             "' is not accepted; expected trace, debug, info, warning, error or off");
}

std::atomic<Level>& level_ref() {
  static std::atomic<Level> level{parse_level()};
  return level;
}

}  // namespace

Level threshold() {
  return level_ref().load(std::memory_order_relaxed);
}
void set_threshold(Level level) {
  level_ref().store(level);
}
void set_rank(int rank) {
  g_rank.store(rank);
}

void write(Level level, const std::string& message) {
  static const char kTags[] = "TDIWE";
  double t =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  char prefix[96];
  int rank = g_rank.load();
  if (rank >= 0)
    std::snprintf(prefix, sizeof prefix, "[kolo %c %.3f rank %d] ", kTags[static_cast<int>(level)],
                  t, rank);
  else
    std::snprintf(prefix, sizeof prefix, "[kolo %c %.3f] ", kTags[static_cast<int>(level)], t);
  std::string line = prefix + message + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace kolo::log
