// Forwarding of a rank's stdout or stderr: kolorun reads the rank's pipe and writes whole
// lines, each with a "[rank] " prefix, so the lines of different ranks never mix.
#pragma once

#include <cstddef>
#include <string>

namespace kolo::kolorun {

inline constexpr size_t kMaxLineBytes = 64 * 1024;  // a longer line is forwarded in pieces

struct Stream {
  int fd = -1;            // non-blocking read end of the rank's pipe; -1 after EOF
  int dest = -1;          // kolorun's stdout or stderr
  std::string prefix;     // "[rank] ", or empty with --no-prefix
  std::string pending;    // bytes after the last newline
  bool mid_line = false;  // the start of the current line was already written
};

// Reads what the pipe holds and forwards its complete lines: one read when `drain` is false,
// everything up to EAGAIN or EOF when true. At EOF the partial last line is flushed too
// (ended with a newline when prefixed) and the fd closed.
void pump(Stream& s, bool drain);

// Flushes what is pending as at EOF and closes the pipe, even if someone still holds its write
// end (a process the rank left behind).
void finish(Stream& s);

}  // namespace kolo::kolorun
