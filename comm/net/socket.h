// RAII TCP socket with deadline-bounded connect/accept/send/recv, shared by the rendezvous store
// and the tcp transport. Every blocking call takes an absolute deadline and throws kolo::Error
// (kTimeout, kPeerLost, kIo) instead of waiting forever.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace kolo::net {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline deadline_after(std::chrono::milliseconds timeout) {
  return Clock::now() + timeout;
}
// Milliseconds left until `deadline`, clamped to [0, cap_ms]: a poll() timeout.
int poll_timeout_ms(Deadline deadline, int cap_ms = 100);

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : peer_(std::move(other.peer_)) { fd_ = other.release(); }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Binds host:port (port 0 picks a free one; host "" or "0.0.0.0" binds every interface).
  static Socket listen(const std::string& host, int port, int backlog = 128);
  // Connects, retrying while nothing listens yet or the host is unreachable (its link may come
  // up late) until the deadline; an address that never answers is given up at the deadline.
  static Socket connect(const std::string& host, int port, Deadline deadline);

  // Waits for one connection until the deadline; an invalid Socket on timeout.
  Socket accept(Deadline deadline);

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void close();

  int local_port() const;
  std::string local_address() const;
  // "ip:port", for messages; remembered from the connect or accept, so a message about a
  // peer that has gone (where getpeername fails) still names it. "?" when never known.
  std::string peer_name() const;

  void set_nonblocking();
  void set_nodelay();
  void set_buffer_sizes(int bytes);

  // Whole-buffer transfers; the socket is made non-blocking and waited on with poll().
  void send_all(const void* data, size_t bytes, Deadline deadline);
  void recv_all(void* data, size_t bytes, Deadline deadline);

 private:
  int fd_ = -1;
  mutable std::string peer_;
};

// A non-loopback IPv4 address of this host that peers can reach, or "127.0.0.1".
std::string routable_address();

// Refuses (kInvalidArgument naming `setting`, e.g. "MASTER_ADDR") a `host` that is no IPv4
// address and no name that resolves to one: an IPv6 address, a "host:port", a typo.
void require_ipv4_host(const std::string& host, const std::string& setting);

}  // namespace kolo::net
