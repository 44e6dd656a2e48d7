// Acceptor: the acceptor's side of the handshake (comm/net/auth.h) for many connections at once,
// driven by poll(). Every accepted connection gets the challenge at once and is then read
// without blocking, so silent or slow strangers cannot hold up the peers behind them: each has
// `handshake_timeout` to send its Hello, and at most kMaxPending wait at a time (a new one
// evicts the oldest). A connection whose Hello fails the secret, or that `check` refuses, gets
// its refusal status and is closed and logged; one that passes gets the accepted reply with
// the acceptor's proof and is handed to the caller.
#pragma once

#include <poll.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "comm/net/auth.h"
#include "comm/net/socket.h"

namespace kolo::net {

struct Accepted {
  Socket sock;
  Hello hello;
};

// What a check says of a verified Hello: an empty `why` accepts it; otherwise it is refused and
// `why` logged, as a warning, or as info when the refusal is `routine` (a client of the next
// init that retries until its own store is up).
struct HelloVerdict {
  std::string why;
  bool routine = false;
};
using HelloCheck = std::function<HelloVerdict(const Hello&)>;

class Acceptor {
 public:
  static constexpr size_t kMaxPending = 64;

  // `who` names the owner in log lines ("store", "tcp setup on rank 3").
  Acceptor(Socket& listener, std::string who, std::chrono::milliseconds handshake_timeout,
           HelloCheck check);

  // Appends the listener and the connections in the handshake; returns how many it added.
  size_t add_poll_fds(std::vector<pollfd>* fds) const;
  // Handles poll's results for the `count` entries add_poll_fds added at `fds`: reads Hellos,
  // answers them, expires slow ones and accepts new connections. Returns the authenticated ones.
  std::vector<Accepted> on_poll(const pollfd* fds, size_t count);
  // Blocks until one connection is authenticated; nullopt when the deadline passes first.
  std::optional<Accepted> wait(Deadline deadline);

  size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    Socket sock;
    std::string peer;
    Challenge challenge{};
    std::string in;
    Deadline deadline;
  };

  // Reads what arrived; true when the connection is finished (accepted into `out`, or refused).
  bool progress(Pending& p, std::vector<Accepted>* out);
  void refuse(const Pending& p, const std::string& why, bool routine = false) const;
  void accept_new();

  Socket& listener_;
  std::string who_;
  std::chrono::milliseconds handshake_timeout_;
  HelloCheck check_;
  std::string secret_;
  std::vector<Pending> pending_;  // oldest first
  std::vector<Accepted> ready_;   // authenticated, not yet returned by wait()
  // After a failed accept (EMFILE and the like the listener stays readable): the listener is
  // left out of poll for a while, and the warning repeats at most every few seconds.
  Deadline accept_paused_until_{};
  Deadline next_accept_warning_{};
  int accept_failures_ = 0;
  // Refused connections: each of the first kLoggedRefusals is a warning line, then one line
  // per second says how many more came (a flood of strangers wrote thousands of lines).
  static constexpr int kLoggedRefusals = 20;
  mutable int64_t refusals_ = 0, unlogged_refusals_ = 0;
  mutable Deadline next_refusal_summary_{};
};

}  // namespace kolo::net
