// Line-by-line forwarding of the ranks' output for kolorun (see kolorun_output.h).
#include "tools/kolorun/kolorun_output.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace kolo::kolorun {
namespace {

// Writes everything, waiting while a non-blocking destination is full. Output to a closed
// stdout (EPIPE) is dropped: the ranks must keep running even if nobody reads their output.
void write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, -1);
    } else if (n < 0 && errno != EINTR) {
      return;
    }
  }
}

// How much of the `take` bytes of `text` from `start` a piece holds without cutting a UTF-8
// character in two: all of them, unless they end inside a character (its lead byte says how
// long it is), which then opens the next piece.
size_t whole_characters(const std::string& text, size_t start, size_t take) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[start + i]); };
  size_t lead = take;  // after the loop: the last byte that is not a continuation (10xxxxxx)
  while (lead > 0 && take - lead < 4 && (byte(lead - 1) & 0xC0) == 0x80) --lead;
  if (lead == 0) return take;
  --lead;
  const unsigned char c = byte(lead);
  const size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  return take - lead < length && lead > 0 ? lead : take;
}

// Forwards the complete lines in s.pending, each with the prefix, in one write. With a prefix,
// a line longer than s.max_line goes as pieces of at most max_line bytes (whole UTF-8
// characters), each ended with a newline and prefixed, as soon as a piece is there; without
// one, such a piece is passed on as it is, the line continuing unchanged. At EOF the partial
// rest goes too: with a prefix ended by a newline, so the next rank's line starts on its own;
// without one, the bytes are passed on unchanged.
void forward_lines(Stream& s, bool at_eof) {
  std::string out;
  size_t start = 0;
  while (start < s.pending.size()) {
    const size_t nl = s.pending.find('\n', start);
    const size_t line = (nl == std::string::npos ? s.pending.size() : nl) - start;
    size_t take;
    bool end_line = false;  // add a newline after the piece
    if (line > s.max_line || (nl == std::string::npos && line == s.max_line)) {
      end_line = !s.prefix.empty();
      take = end_line ? whole_characters(s.pending, start, s.max_line) : s.max_line;
    } else if (nl != std::string::npos) {
      take = line + 1;
    } else if (at_eof) {
      take = line;
      end_line = !s.prefix.empty();
    } else {
      break;  // the rest of this line has not arrived yet
    }
    out += s.prefix;
    out.append(s.pending, start, take);
    if (end_line) out += '\n';
    start += take;
  }
  s.pending.erase(0, start);
  if (!out.empty()) write_all(s.dest, out);
}

}  // namespace

// Reading one chunk at a time (drain == false) keeps one chatty rank from starving the others.
void pump(Stream& s, bool drain) {
  char buf[65536];
  while (s.fd >= 0) {
    ssize_t n = read(s.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {  // EOF, or an error that ends the stream just the same
      forward_lines(s, true);
      close(s.fd);
      s.fd = -1;
      return;
    }
    s.pending.append(buf, static_cast<size_t>(n));
    forward_lines(s, false);
    if (!drain) return;
  }
}

void finish(Stream& s) {
  pump(s, true);
  if (s.fd < 0) return;
  forward_lines(s, true);
  close(s.fd);
  s.fd = -1;
}

}  // namespace kolo::kolorun
