// TCP transport: a full mesh of authenticated sockets, one Pair per peer, and the progress
// engine that moves every queued transfer with non-blocking I/O and sleeps in poll().
// Works across hosts; the fallback when ranks do not share memory.
#pragma once

#include <poll.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/net/auth.h"
#include "comm/net/socket.h"
#include "comm/transport/context.h"
#include "comm/transport/tcp/pair.h"

namespace kolo::transport::tcp {

std::unique_ptr<Context> create(const ContextOptions& options);
// Reads this transport's settings (KOLO_TCP_BUFFER_BYTES), throwing kInvalidArgument for a bad one.
void check_settings();

class TcpContext : public Context {
 public:
  explicit TcpContext(const ContextOptions& options);
  TransportKind kind() const override { return TransportKind::kTcp; }
  // "host:port" this rank listened on during setup.
  const std::string& address() const { return address_; }

 protected:
  void do_post(Transfer* t) override;
  void do_wait(Transfer* t) override;
  void do_abort() noexcept override;

 private:
  void connect_mesh(const ContextOptions& options);
  void connect_lower(const ContextOptions& options, net::Deadline deadline);
  void accept_higher(net::Socket& listener, const ContextOptions& options, net::Deadline deadline);
  std::string check_hello(const net::Hello& hello, const std::string& tag,
                          const std::vector<bool>& claimed) const;
  void add_pair(int peer, net::Socket sock);

  size_t progress_all(const Transfer* t);
  void poll_busy(net::Deadline deadline);

  int buffer_bytes_;
  std::string address_;
  std::vector<std::unique_ptr<Pair>> pairs_;  // by peer rank; null for ourselves
  std::vector<pollfd> poll_fds_;              // reused by poll_busy
  std::vector<Pair*> poll_pairs_;
};

}  // namespace kolo::transport::tcp
