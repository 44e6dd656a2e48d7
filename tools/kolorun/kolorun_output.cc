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

// Forwards the complete lines in s.pending, each with the prefix, in one write; at EOF (or when
// a line grows too long) the partial rest too. With a prefix, EOF ends the partial line so the
// next rank's line starts on its own; without one, the bytes are passed on unchanged.
void forward_lines(Stream& s, bool at_eof) {
  std::string out;
  size_t start = 0;
  for (size_t nl; (nl = s.pending.find('\n', start)) != std::string::npos; start = nl + 1) {
    if (!s.mid_line) out += s.prefix;
    out.append(s.pending, start, nl + 1 - start);
    s.mid_line = false;
  }
  s.pending.erase(0, start);
  if (!s.pending.empty() && (at_eof || s.pending.size() >= kMaxLineBytes)) {
    if (!s.mid_line) out += s.prefix;
    out += s.pending;
    s.pending.clear();
    s.mid_line = true;
  }
  if (at_eof && s.mid_line && !s.prefix.empty()) out += '\n';
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
