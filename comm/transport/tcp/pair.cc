// Pair: non-blocking scatter/gather I/O between the transfer queues and one TCP socket.
// Nothing here sleeps; TcpContext polls the sockets of all busy pairs together.
#include "comm/transport/tcp/pair.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kolo::transport::tcp {
namespace {

// Transfers handed to the kernel in one call; enough to batch the small messages of a
// latency-bound collective, few enough to live on the stack.
constexpr size_t kMaxIov = 16;

const char* const kClosedText = "connection closed (process exited or aborted)";

// Fills `iov` with the unfinished parts of the transfers at the head of `queue`; returns the
// number of entries and stores their total length in `total`.
size_t gather(const std::deque<Transfer*>& queue, iovec* iov, size_t& total) {
  size_t n = 0;
  total = 0;
  for (auto it = queue.begin(); it != queue.end() && n < kMaxIov; ++it, ++n) {
    Transfer* t = *it;
    iov[n].iov_base = t->data + t->done;
    iov[n].iov_len = t->bytes - t->done;
    total += iov[n].iov_len;
  }
  return n;
}

// Credits `bytes` moved by the kernel to the head of `queue`, popping what completed.
void advance(std::deque<Transfer*>& queue, size_t bytes) {
  while (bytes > 0) {
    Transfer* t = queue.front();
    size_t take = std::min(bytes, t->bytes - t->done);
    t->done += take;
    bytes -= take;
    if (t->complete()) queue.pop_front();
  }
}

bool would_block(int error) {
  return error == EAGAIN || error == EWOULDBLOCK;
}

}  // namespace

Pair::Pair(int peer, net::Socket sock) : peer_(peer), sock_(std::move(sock)) {}

void Pair::post(Transfer* t) {
  (t->kind == Transfer::Kind::kSend ? sends_ : recvs_).push_back(t);
}

size_t Pair::progress() {
  if (closed_) return 0;
  size_t moved = progress_sends();
  return moved + progress_recvs();
}

size_t Pair::progress_sends() {
  size_t moved = 0;
  while (!sends_.empty() && !closed_) {
    iovec iov[kMaxIov];
    msghdr msg{};
    size_t wanted = 0;
    msg.msg_iov = iov;
    msg.msg_iovlen = gather(sends_, iov, wanted);
    ssize_t n = ::sendmsg(sock_.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && !would_block(errno)) mark_closed(errno);
    if (n <= 0) break;
    advance(sends_, static_cast<size_t>(n));
    moved += static_cast<size_t>(n);
    if (static_cast<size_t>(n) < wanted) break;  // the socket buffer is full
  }
  return moved;
}

size_t Pair::progress_recvs() {
  size_t moved = 0;
  while (!recvs_.empty() && !closed_) {
    iovec iov[kMaxIov];
    msghdr msg{};
    size_t wanted = 0;
    msg.msg_iov = iov;
    msg.msg_iovlen = gather(recvs_, iov, wanted);
    ssize_t n = ::recvmsg(sock_.fd(), &msg, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) mark_closed(0);  // EOF: the peer closed or shut down its side
    if (n < 0 && !would_block(errno)) mark_closed(errno);
    if (n <= 0) break;
    advance(recvs_, static_cast<size_t>(n));
    moved += static_cast<size_t>(n);
    if (static_cast<size_t>(n) < wanted) break;  // nothing more has arrived yet
  }
  return moved;
}

short Pair::poll_events() const {
  short events = 0;
  // POLLRDHUP: the peer's FIN (exit, abort) wakes a sender whose buffer is full; without it
  // a send to a dead peer would only notice at the timeout.
  if (!sends_.empty()) events |= POLLOUT | POLLRDHUP;
  if (!recvs_.empty()) events |= POLLIN;
  return events;
}

void Pair::note_events(short revents) {
  if (idle() || closed_) return;
  if (revents & POLLERR) {
    int error = 0;
    socklen_t len = sizeof error;
    ::getsockopt(sock_.fd(), SOL_SOCKET, SO_ERROR, &error, &len);
    mark_closed(error);
    return;
  }
  // A peer only closes its side when it is gone: while our sends are still queued it cannot
  // have received them, so it did not finish the collective normally. Pending receives learn
  // about the hang-up from recv() returning EOF after the last buffered byte.
  if ((revents & (POLLHUP | POLLRDHUP)) && !sends_.empty()) mark_closed(0);
}

void Pair::mark_closed(int error) {
  closed_ = true;
  if (error == 0 || error == ECONNRESET || error == EPIPE)
    close_reason_ = kClosedText;
  else
    close_reason_ = std::string("connection failed: ") + std::strerror(error);
}

void Pair::shutdown() noexcept {
  if (sock_.valid()) ::shutdown(sock_.fd(), SHUT_RDWR);
}

}  // namespace kolo::transport::tcp
