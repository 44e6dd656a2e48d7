// Acceptor: concurrent, non-blocking server handshakes for the store and the tcp transport.
#include "comm/net/acceptor.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "comm/base/error.h"
#include "comm/base/log.h"

namespace kolo::net {

Acceptor::Acceptor(Socket& listener, std::string who, std::chrono::milliseconds handshake_timeout,
                   HelloCheck check)
    : listener_(listener),
      who_(std::move(who)),
      handshake_timeout_(handshake_timeout),
      check_(std::move(check)),
      secret_(job_secret()) {}

size_t Acceptor::add_poll_fds(std::vector<pollfd>* fds) const {
  // A negative fd keeps the listener's place (index 0) while poll ignores it.
  const bool paused = Clock::now() < accept_paused_until_;
  fds->push_back({paused ? -1 : listener_.fd(), POLLIN, 0});
  for (const Pending& p : pending_) fds->push_back({p.sock.fd(), POLLIN, 0});
  return 1 + pending_.size();
}

std::vector<Accepted> Acceptor::on_poll(const pollfd* fds, size_t count) {
  std::vector<Accepted> out;
  const Deadline now = Clock::now();
  std::vector<Pending> kept;
  for (size_t i = 0; i < pending_.size(); ++i) {
    Pending& p = pending_[i];
    bool done = i + 1 < count && fds[i + 1].revents != 0 && progress(p, &out);
    if (!done && now > p.deadline) {
      refuse(p,
             "no complete handshake within " + std::to_string(handshake_timeout_.count()) + " ms");
      done = true;
    }
    if (!done) kept.push_back(std::move(p));
  }
  pending_ = std::move(kept);
  if (count > 0 && (fds[0].revents & POLLIN)) accept_new();
  return out;
}

std::optional<Accepted> Acceptor::wait(Deadline deadline) {
  std::vector<pollfd> fds;
  while (ready_.empty()) {
    if (Clock::now() >= deadline) return std::nullopt;
    fds.clear();
    size_t count = add_poll_fds(&fds);
    Deadline wake = deadline;
    for (const Pending& p : pending_) wake = std::min(wake, p.deadline);
    int rc = ::poll(fds.data(), count, poll_timeout_ms(wake, 100));
    if (rc < 0) {
      if (errno != EINTR) KOLO_THROW_ERRNO(who_, ": poll");
      for (pollfd& f : fds) f.revents = 0;
    }
    for (Accepted& a : on_poll(fds.data(), count)) ready_.push_back(std::move(a));
  }
  Accepted first = std::move(ready_.front());
  ready_.erase(ready_.begin());
  return first;
}

bool Acceptor::progress(Pending& p, std::vector<Accepted>* out) {
  char buf[kHelloBytes];
  ssize_t n = ::recv(p.sock.fd(), buf, kHelloBytes - p.in.size(), MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    refuse(p, "closed during the handshake");
    return true;
  }
  if (n > 0) p.in.append(buf, static_cast<size_t>(n));
  if (p.in.size() < kHelloBytes) return false;

  const auto* bytes = reinterpret_cast<const uint8_t*>(p.in.data());
  Status status = Status::kAccepted;
  std::string why;
  bool routine = false;
  Hello hello{};
  try {
    hello = verify_hello(bytes, p.challenge, secret_);
    HelloVerdict verdict = check_ ? check_(hello) : HelloVerdict{};
    why = std::move(verdict.why);
    routine = verdict.routine;
    if (!why.empty()) status = Status::kUnexpected;
  } catch (const Error& e) {
    status = status_of(e);
    why = e.what();
  }
  Reply reply = make_reply(status, bytes, p.challenge, secret_);
  // 33 bytes on a connection that has sent nothing else: the socket buffer always takes them.
  bool sent = ::send(p.sock.fd(), reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL) ==
              static_cast<ssize_t>(reply.size());
  if (why.empty() && !sent) why = "the handshake reply could not be sent";
  if (!why.empty()) {
    refuse(p, why, routine && sent);
    return true;
  }
  out->push_back({std::move(p.sock), std::move(hello)});
  return true;
}

void Acceptor::refuse(const Pending& p, const std::string& why, bool routine) const {
  if (routine) {
    KOLO_LOG(kInfo, who_, ": refused connection from ", p.peer, ": ", why);
    return;
  }
  if (++refusals_ <= kLoggedRefusals) {
    KOLO_LOG(kWarning, who_, ": refused connection from ", p.peer, ": ", why,
             refusals_ == kLoggedRefusals ? " (later refusals are counted, once a second)" : "");
    return;
  }
  ++unlogged_refusals_;
  const Deadline now = Clock::now();
  if (now < next_refusal_summary_) return;
  next_refusal_summary_ = now + std::chrono::seconds(1);
  KOLO_LOG(kWarning, who_, ": refused ", unlogged_refusals_, " more connection(s) (", refusals_,
           " in all; the last from ", p.peer, ": ", why, ")");
  unlogged_refusals_ = 0;
}

void Acceptor::accept_new() {
  while (true) {
    Socket sock;
    try {
      sock = listener_.accept(Clock::now());
    } catch (const std::exception& e) {  // EMFILE and the like: try again a little later
      const Deadline now = Clock::now();
      accept_paused_until_ = now + std::chrono::milliseconds(50);
      ++accept_failures_;
      if (now >= next_accept_warning_) {
        KOLO_LOG(kWarning, who_, ": accept failed (", accept_failures_,
                 " time(s) so far; retrying every 50 ms): ", e.what());
        next_accept_warning_ = now + std::chrono::seconds(5);
      }
      return;
    }
    if (!sock.valid()) return;
    if (pending_.size() >= kMaxPending) {
      refuse(pending_.front(), "evicted: too many connections waiting for the handshake");
      pending_.erase(pending_.begin());
    }
    Pending p;
    p.peer = sock.peer_name();
    p.challenge = make_challenge();
    p.deadline = Clock::now() + handshake_timeout_;
    if (::send(sock.fd(), p.challenge.data(), p.challenge.size(), MSG_DONTWAIT | MSG_NOSIGNAL) !=
        static_cast<ssize_t>(p.challenge.size())) {
      refuse(p, "the challenge could not be sent");
      continue;
    }
    p.sock = std::move(sock);
    pending_.push_back(std::move(p));
  }
}

}  // namespace kolo::net
