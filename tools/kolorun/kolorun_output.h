// Forwarding of a rank's stdout or stderr: kolorun reads the rank's pipe and writes whole
// lines, each with a "[rank] " prefix, so the lines of different ranks never mix. A line longer
// than the stream's max_line is split into several lines, each prefixed: kolorun never waits
// for the end of a line it cannot hold, nor writes part of one that another rank could follow.
// Without a prefix (--no-prefix) the bytes pass through unchanged: nothing is split.
#pragma once

#include <cstddef>
#include <string>

namespace kolo::kolorun {

inline constexpr size_t kMaxLineBytes = 64 * 1024;  // a rank's longer line is split

struct Stream {
  int fd = -1;                      // non-blocking read end of the rank's pipe; -1 after EOF
  int dest = -1;                    // kolorun's stdout or stderr
  std::string prefix;               // "[rank] ", or empty with --no-prefix (and --hosts)
  size_t max_line = kMaxLineBytes;  // bytes of a line (newline not counted) before a split
                                    // (without a prefix: before a piece is passed on)
  std::string pending;              // bytes after the last newline
};

// Reads what the pipe holds and forwards its complete lines: one read when `drain` is false,
// everything up to EAGAIN or EOF when true. At EOF the partial last line is flushed too
// (ended with a newline when prefixed) and the fd closed.
void pump(Stream& s, bool drain);

// Flushes what is pending as at EOF and closes the pipe, even if someone still holds its write
// end (a process the rank left behind).
void finish(Stream& s);

}  // namespace kolo::kolorun
