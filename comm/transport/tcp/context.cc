// TcpContext: mesh setup over the rendezvous store, and the poll()-driven progress engine.
//
// Setup: every rank listens on an ephemeral port and publishes "host:port" under store key
// "tcp/<rank>". Rank i connects to every j < i and accepts from every j > i, so each pair of
// ranks gets exactly one connection without any further agreement. Every connection opens with
// the authenticated handshake of net/auth.h, in which the connector names its rank and the
// communicator (tag) it belongs to. The acceptor (net::Acceptor) handshakes every incoming
// connection at once, and refuses, logs and closes one that fails (garbage, wrong secret, wrong
// communicator, impossible rank): a port scanner or a stray process of another job cannot break
// setup, and silent connectors are dropped after kAcceptHandshakeTimeout without holding up
// the others.
//
// Data path: waiting progresses every busy pair without blocking, then sleeps in poll() on the
// busy sockets only (never spins: many ranks may share few cores). No byte moving for the
// timeout is kTimeout; a connection closed under queued transfers is kPeerLost. Abort
// shuts every socket down, so peers see EOF at once instead of waiting out their own timeout.
#include "comm/transport/tcp/context.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>
#include <thread>

#include "comm/base/env.h"
#include "comm/base/error.h"
#include "comm/base/log.h"
#include "comm/bootstrap/store.h"
#include "comm/net/acceptor.h"
#include "comm/net/auth.h"

namespace kolo::transport::tcp {
namespace {

using std::chrono::milliseconds;

constexpr int64_t kDefaultBufferBytes = 4 << 20;
// Below this the receive window is smaller than a loopback segment and TCP falls back to
// persist-timer probes: 8 KiB every 200 ms, slow enough to run no collective yet never quiet
// long enough for the deadline (KOLO_TCP_BUFFER_BYTES=4096 to 12288 did so).
constexpr int64_t kMinBufferBytes = 64 << 10;
constexpr auto kAcceptHandshakeTimeout = std::chrono::seconds(5);
constexpr int kPollCapMs = 100;  // a sleeping wait re-checks its deadline this often

// Where to listen: the explicit option, then KOLO_TCP_ADDR, then loopback when the job's store
// is on loopback or unknown (a single-host job), else an address other hosts can reach.
std::string choose_host(const ContextOptions& options) {
  if (!options.bind_host.empty()) return options.bind_host;
  if (auto addr = env::get("KOLO_TCP_ADDR")) {
    net::require_ipv4_host(*addr, "KOLO_TCP_ADDR");
    return *addr;
  }
  auto store = env::get("KOLO_ADDR");
  if (!store) store = env::get("MASTER_ADDR");
  if (!store || net::is_loopback(*store)) return "127.0.0.1";
  return net::routable_address();
}

// What peers should dial: a wildcard bind is reachable at the routable address.
std::string advertised_host(const std::string& host) {
  return host == "0.0.0.0" ? net::routable_address() : host;
}

milliseconds time_left(net::Deadline deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - net::Clock::now());
  return std::max(left, milliseconds(0));
}

std::pair<std::string, int> split_address(const std::string& address) {
  size_t colon = address.rfind(':');
  KOLO_CHECK_ARG(colon != std::string::npos && colon > 0, "malformed tcp address '", address,
                 "' in the store");
  int port = static_cast<int>(env::parse_int(address.substr(colon + 1), "tcp port", 1, 65535));
  return {address.substr(0, colon), port};
}

// e.what() without its "kolo <code> error: " prefix, for quoting inside another message.
std::string bare_message(const Error& e) {
  std::string text = e.what();
  std::string prefix = std::string("kolo ") + error_code_name(e.code()) + " error: ";
  return text.rfind(prefix, 0) == 0 ? text.substr(prefix.size()) : text;
}

}  // namespace

std::unique_ptr<Context> create(const ContextOptions& options) {
  return std::make_unique<TcpContext>(options);
}

namespace {

int buffer_bytes_setting() {
  return static_cast<int>(env::get_int("KOLO_TCP_BUFFER_BYTES", kDefaultBufferBytes,
                                       kMinBufferBytes, int64_t{1} << 30));
}

}  // namespace

void check_settings() {
  buffer_bytes_setting();
}

TcpContext::TcpContext(const ContextOptions& options)
    : Context(options), buffer_bytes_(buffer_bytes_setting()), pairs_(static_cast<size_t>(size_)) {
  if (size_ > 1) connect_mesh(options);
}

void TcpContext::connect_mesh(const ContextOptions& options) {
  KOLO_CHECK_ARG(options.store != nullptr, "the tcp transport needs a rendezvous store");
  net::Deadline deadline = net::deadline_after(options.timeout);
  std::string host = choose_host(options);
  net::require_secret_for(host, "the tcp transport of rank " + std::to_string(rank_));
  const auto tcp_addr = options.bind_host.empty() ? env::get("KOLO_TCP_ADDR") : std::nullopt;
  // Ranks on other hosts cannot dial a loopback address: every rank waited out its deadline.
  // (Hosts told apart by KOLO_HOSTNAME around a store on loopback are one machine.)
  KOLO_CHECK_ARG(
      !tcp_addr || options.hosts.empty() || !net::is_loopback(host) || options.store_on_loopback,
      "KOLO_TCP_ADDR=", tcp_addr.value_or(""),
      " is a loopback address, but the job spans hosts: give an address of this host "
      "that the others reach, or leave it unset");
  net::Socket listener;
  try {
    listener = net::Socket::listen(host, 0);
  } catch (const Error& e) {
    if (!tcp_addr) throw;
    KOLO_THROW(e.code(), "KOLO_TCP_ADDR=", *tcp_addr, ": ", e.message(),
               " (it must be an address of this host)");
  }
  listener.set_buffer_sizes(buffer_bytes_);  // accepted sockets inherit the sizes
  address_ = advertised_host(host) + ":" + std::to_string(listener.local_port());
  options.store->set("tcp/" + std::to_string(rank_), address_);
  KOLO_LOG(kDebug, "tcp setup on rank ", rank_, ": listening at ", address_);

  connect_lower(options, deadline);
  accept_higher(listener, options, deadline);
  KOLO_LOG(kDebug, "tcp setup on rank ", rank_, ": connected to ", size_ - 1, " peers");
}  // the listener closes here: later connection attempts are refused by the kernel

namespace {

// A connection to a lower rank's listener, authenticated. Strangers flooding that listener can
// make its acceptor drop this connection while its handshake waits (it holds 64): the
// connection closes without a verdict, and is made again (a few times, each reconnect within a
// second: a listener that is gone, its rank dead, refuses and ends the tries).
net::Socket connect_to_peer(const std::string& host, int port, const net::Hello& hello,
                            const std::string& secret, net::Deadline deadline) {
  for (int attempt = 1;; ++attempt) {
    const net::Deadline reconnect =
        attempt == 1 ? deadline : std::min(deadline, net::deadline_after(milliseconds(1000)));
    net::Socket sock = net::Socket::connect(host, port, reconnect);
    try {
      net::client_handshake(sock, hello, secret, deadline);
      return sock;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kPeerLost || attempt == 10 || net::Clock::now() >= deadline) throw;
    }
    std::this_thread::sleep_for(milliseconds(10 * attempt));
  }
}

}  // namespace

void TcpContext::connect_lower(const ContextOptions& options, net::Deadline deadline) {
  const net::Hello hello{net::Role::kTransportPeer, rank_, options.tag};
  const std::string secret = net::job_secret();
  for (int peer = 0; peer < rank_; ++peer) {
    std::string address;
    try {
      address = bootstrap::wait_for_key(*options.store, "tcp/" + std::to_string(peer),
                                        time_left(deadline));
      auto [host, port] = split_address(address);
      add_pair(peer, connect_to_peer(host, port, hello, secret, deadline));
    } catch (const Error& e) {
      KOLO_THROW(e.code(), "tcp setup on rank ", rank_, ": connecting to ", describe_peer(peer),
                 address.empty() ? "" : " at " + address, ": ", bare_message(e));
    }
  }
}

void TcpContext::accept_higher(net::Socket& listener, const ContextOptions& options,
                               net::Deadline deadline) {
  const std::string& tag = options.tag;
  std::vector<bool> claimed(static_cast<size_t>(size_), false);
  net::Acceptor acceptor(listener, "tcp setup on rank " + std::to_string(rank_),
                         kAcceptHandshakeTimeout, [&](const net::Hello& hello) {
                           std::string why = check_hello(hello, tag, claimed);
                           if (why.empty()) claimed[static_cast<size_t>(hello.rank)] = true;
                           return net::HelloVerdict{why};
                         });
  for (int connected = 0; connected < size_ - 1 - rank_; ++connected) {
    // In quarter seconds: between them, a higher rank that gave up while setting up (its reason
    // in the store) ends the wait at once instead of at the deadline.
    std::optional<net::Accepted> accepted;
    while (
        !(accepted = acceptor.wait(std::min(deadline, net::deadline_after(milliseconds(250))))) &&
        net::Clock::now() < deadline)
      bootstrap::throw_if_setup_failed(*options.store, time_left(deadline));
    if (!accepted) {
      std::string missing;
      for (int peer = rank_ + 1; peer < size_; ++peer)
        if (!pairs_[static_cast<size_t>(peer)])
          missing += (missing.empty() ? "" : ", ") + describe_peer(peer);
      KOLO_THROW(ErrorCode::kTimeout, "tcp setup on rank ", rank_, ": ", missing,
                 " did not connect within the setup timeout (KOLO_TIMEOUT_SECONDS)");
    }
    add_pair(accepted->hello.rank, std::move(accepted->sock));
  }
}

// Why an authenticated Hello is still not one of our peers ("" when it is); it is refused in
// the handshake, so the connector learns it too.
std::string TcpContext::check_hello(const net::Hello& hello, const std::string& tag,
                                    const std::vector<bool>& claimed) const {
  if (hello.role != net::Role::kTransportPeer)
    return "not a transport peer (role " + std::to_string(static_cast<uint32_t>(hello.role)) + ")";
  if (hello.tag != tag) return "belongs to communicator '" + hello.tag + "', not '" + tag + "'";
  if (hello.rank <= rank_ || hello.rank >= size_)
    return "claims rank " + std::to_string(hello.rank) + ", expected one of " +
           std::to_string(rank_ + 1) + ".." + std::to_string(size_ - 1);
  if (claimed[static_cast<size_t>(hello.rank)])
    return "claims rank " + std::to_string(hello.rank) + ", which is already connected";
  return "";
}

void TcpContext::add_pair(int peer, net::Socket sock) {
  sock.set_nonblocking();
  sock.set_nodelay();
  sock.set_buffer_sizes(buffer_bytes_);
  pairs_[static_cast<size_t>(peer)] = std::make_unique<Pair>(peer, std::move(sock));
}

void TcpContext::do_post(Transfer* t) {
  Pair* pair = pairs_[static_cast<size_t>(t->peer)].get();
  KOLO_ASSERT(pair != nullptr);
  pair->post(t);
}

void TcpContext::do_wait(Transfer* t) {
  // The timeout counts from the start of the wait or the last byte moved on any pair.
  net::Deadline last_progress = net::Clock::now();
  while (true) {
    size_t moved = progress_all(t);
    if (t->complete()) return;
    net::Deadline now = net::Clock::now();
    if (moved > 0) {
      last_progress = now;
      continue;  // try again before sleeping: usually the sockets now say EAGAIN
    }
    check_wait(now - last_progress, t->peer);
    poll_busy(last_progress + timeout_);
  }
}

// Progresses every busy pair; kPeerLost (preferring t's peer) when a busy connection closed.
size_t TcpContext::progress_all(const Transfer* t) {
  size_t moved = 0;
  int lost = -1;
  for (auto& pair : pairs_) {
    if (!pair || pair->idle()) continue;
    moved += pair->progress();
    if (pair->closed() && (lost < 0 || pair->peer() == t->peer)) lost = pair->peer();
  }
  if (lost >= 0) throw_peer_lost(lost, pairs_[static_cast<size_t>(lost)]->close_reason());
  return moved;
}

// Sleeps until a busy socket is ready, a busy peer hangs up, kPollCapMs pass or the deadline.
void TcpContext::poll_busy(net::Deadline deadline) {
  poll_fds_.clear();
  poll_pairs_.clear();
  for (auto& pair : pairs_) {
    if (!pair || pair->idle()) continue;
    poll_fds_.push_back({pair->fd(), pair->poll_events(), 0});
    poll_pairs_.push_back(pair.get());
  }
  int rc = ::poll(poll_fds_.data(), poll_fds_.size(), net::poll_timeout_ms(deadline, kPollCapMs));
  if (rc < 0 && errno != EINTR) KOLO_THROW_ERRNO("poll");
  for (size_t i = 0; rc > 0 && i < poll_fds_.size(); ++i)
    if (poll_fds_[i].revents != 0) poll_pairs_[i]->note_events(poll_fds_[i].revents);
}

void TcpContext::do_abort() noexcept {
  for (auto& pair : pairs_)
    if (pair) pair->shutdown();
}

}  // namespace kolo::transport::tcp
