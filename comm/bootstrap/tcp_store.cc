// TcpStore client and event-driven TcpStoreServer.
#include "comm/bootstrap/tcp_store.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "comm/base/env.h"
#include "comm/base/error.h"
#include "comm/base/log.h"
#include "comm/bootstrap/store_protocol.h"
#include "comm/net/acceptor.h"
#include "comm/net/auth.h"

namespace kolo::bootstrap {
namespace {

constexpr auto kHandshakeTimeout = std::chrono::seconds(10);

// The handshake's tag: which generation of the store the client is looking for.
std::string store_tag(uint64_t generation) {
  return "store/" + std::to_string(generation);
}

// Without a job secret the store listens on loopback only (unless KOLO_INSECURE=1).
net::Socket listen_for_store(const std::string& host, int port) {
  net::require_secret_for(host.empty() ? "0.0.0.0" : host, "the rendezvous store");
  return net::Socket::listen(host, port);
}

// Store clients are ranks of this job (any rank, role kStoreClient) of this generation; one of
// the next init (kolo_init after kolo_shutdown) is turned away as routine and retries.
net::HelloVerdict check_client(const net::Hello& hello, uint64_t generation) {
  if (hello.role != net::Role::kStoreClient) return {"not a store client"};
  if (hello.tag != store_tag(generation))
    return {"a client of another init (" + hello.tag + "; this store serves " +
                store_tag(generation) + "): it retries until that store is up",
            true};
  return {};
}

}  // namespace

// One authenticated client connection as the server sees it.
struct Connection {
  net::Socket sock;
  std::string peer;
  std::string in, out;
};

// The store's values and waiters (store_protocol.h), with connections named by their fd.
struct TcpStoreServer::State : StoreState {
  std::map<int, Connection> conns;  // by fd
};

TcpStoreServer::TcpStoreServer(const std::string& host, int port, uint64_t generation)
    : listener_(listen_for_store(host, port)),
      port_(listener_.local_port()),
      acceptor_(std::make_unique<net::Acceptor>(
          listener_, "store", kHandshakeTimeout,
          [generation](const net::Hello& hello) { return check_client(hello, generation); })),
      state_(std::make_unique<State>()) {
  thread_ = std::thread([this] { serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void TcpStoreServer::serve() {
  State& s = *state_;
  net::Acceptor& acceptor = *acceptor_;
  std::vector<pollfd> fds;
  while (!stop_) {
    fds.clear();
    size_t handshaking = acceptor.add_poll_fds(&fds);
    for (auto& [fd, c] : s.conns) {
      // A client that does not read its replies is not read from either: its queue stays bounded.
      short events = c.out.size() < kMaxQueuedReply ? POLLIN : 0;
      fds.push_back({fd, static_cast<short>(events | (c.out.empty() ? 0 : POLLOUT)), 0});
    }
    if (::poll(fds.data(), fds.size(), 100) < 0) {
      if (errno != EINTR) KOLO_LOG(kWarning, "store: poll failed: ", std::strerror(errno));
      continue;
    }
    std::vector<std::pair<int, std::string>> to_close;
    for (size_t i = handshaking; i < fds.size(); ++i) {
      int fd = fds[i].fd;
      Connection& c = s.conns.at(fd);
      if (fds[i].revents & POLLOUT) {
        ssize_t n = ::send(fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) c.out.erase(0, static_cast<size_t>(n));
      }
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[65536];
        ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) {
          to_close.push_back({fd, ""});
          continue;
        }
        if (n > 0) c.in.append(buf, static_cast<size_t>(n));
      }
      std::string why;
      if (!handle_requests(s, fd, c.in, c.out, why)) to_close.push_back({fd, why});
    }
    for (auto& [fd, why] : to_close) {
      if (!why.empty())
        KOLO_LOG(kWarning, "store: closed the connection from ", s.conns[fd].peer, ": ", why);
      s.conns.erase(fd);
      for (auto& [key, list] : s.waiters) std::erase(list, fd);
    }
    // New connections are added after this round's fds are handled: a closed fd's number may
    // come back from accept().
    for (net::Accepted& a : acceptor.on_poll(fds.data(), handshaking)) {
      int fd = a.sock.fd();
      Connection c;
      c.peer = a.sock.peer_name();
      c.sock = std::move(a.sock);
      s.conns[fd] = std::move(c);
    }
    // Answer gets whose key has appeared.
    for (auto it = s.waiters.begin(); it != s.waiters.end();) {
      auto v = s.values.find(it->first);
      if (v == s.values.end()) {
        ++it;
        continue;
      }
      for (int fd : it->second)
        if (s.conns.count(fd)) s.conns[fd].out += encode_response(v->second);
      it = s.waiters.erase(it);
    }
  }
}

TcpStore::TcpStore(std::string host, int port, int rank, std::chrono::milliseconds timeout,
                   uint64_t generation)
    : host_(std::move(host)),
      port_(port),
      rank_(rank),
      connect_timeout_(timeout),
      generation_(generation) {
  std::lock_guard<std::mutex> lock(mutex_);
  ensure_connected(connect_timeout_);
}

void TcpStore::ensure_connected(std::chrono::milliseconds timeout) {
  if (sock_.valid()) return;
  auto deadline = net::deadline_after(timeout);
  std::string refused;  // the last refusal by an earlier init's store
  auto pause = std::chrono::milliseconds(10);
  while (true) {
    try {
      net::Socket sock = net::Socket::connect(host_, port_, deadline);
      net::client_handshake(sock, {net::Role::kStoreClient, rank_, store_tag(generation_)},
                            net::job_secret(), deadline);
      sock_ = std::move(sock);
      return;
    } catch (const Error& e) {
      // An earlier init's store, refusing this generation or closing as its process shuts it
      // down: the store this init waits for comes after it. A wrong secret is final.
      const bool earlier_store = dynamic_cast<const net::UnexpectedPeer*>(&e) != nullptr ||
                                 e.code() == ErrorCode::kPeerLost;
      if (earlier_store) refused = e.message();
      if (std::chrono::steady_clock::now() >= deadline && !refused.empty())
        KOLO_THROW(ErrorCode::kTimeout, refused,
                   " until the deadline (KOLO_TIMEOUT_SECONDS): is rank 0 in another init?");
      if (!earlier_store) throw;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(200));
    }
  }
}

std::string TcpStore::request(uint8_t cmd, const std::string& key, const std::string& value,
                              std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  ensure_connected(std::min(timeout, connect_timeout_));
  std::string frame(kHeaderBytes, '\0');
  frame[0] = static_cast<char>(cmd);
  uint32_t key_len = static_cast<uint32_t>(key.size());
  uint64_t value_len = value.size();
  std::memcpy(frame.data() + 1, &key_len, 4);
  std::memcpy(frame.data() + 5, &value_len, 8);
  frame += key;
  frame += value;
  auto deadline = net::deadline_after(timeout);
  try {
    sock_.send_all(frame.data(), frame.size(), deadline);
    char head[9];
    sock_.recv_all(head, sizeof head, deadline);
    uint64_t len;
    std::memcpy(&len, head + 1, 8);
    // The reply is checked before it is believed: a status other than 0 or a length beyond
    // what the server accepts in a set means the other end is not (or no longer) a kolo store.
    if (head[0] != 0 || len > kMaxValue + 1)  // + 1: a check's flag ahead of the value
      KOLO_THROW(ErrorCode::kIo, "malformed reply (status ", int{static_cast<uint8_t>(head[0])},
                 ", length ", len, ")");
    std::string out(len, '\0');
    sock_.recv_all(out.data(), len, deadline);
    return out;
  } catch (const Error& e) {
    sock_.close();  // the stream is out of step now; reconnect on the next request
    if (e.code() == ErrorCode::kTimeout)
      KOLO_THROW(ErrorCode::kTimeout, "store key '", key, "' was not set within ", timeout.count(),
                 " ms (a rank did not arrive; KOLO_TIMEOUT_SECONDS)");
    // The store lives in rank 0's process: a closed connection means rank 0 left (failed or
    // exited); its own error says why.
    KOLO_THROW(e.code(), "rendezvous store at ", host_, ":", port_, ": ", e.what(),
               e.code() == ErrorCode::kPeerLost && rank_ != 0
                   ? " (lost rank 0, which hosts it: its process exited or failed; rank 0's "
                     "error says why)"
                   : "");
  }
}

void TcpStore::set(const std::string& key, const std::string& value) {
  request(kSet, key, value, connect_timeout_);
}

void TcpStore::set_within(const std::string& key, const std::string& value,
                          std::chrono::milliseconds timeout) {
  request(kSet, key, value, timeout);
}

std::string TcpStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  return request(kGet, key, "", timeout);
}

std::optional<std::string> TcpStore::check(const std::string& key,
                                           std::chrono::milliseconds timeout) {
  const std::string reply = request(kCheck, key, "", std::min(timeout, connect_timeout_));
  if (reply.empty() || (reply[0] != '0' && reply[0] != '1'))
    KOLO_THROW(ErrorCode::kIo, "rendezvous store at ", host_, ":", port_, ": check of '", key,
               "' answered ", reply.size(), " bytes that are not a check's reply");
  return reply[0] == '1' ? std::optional<std::string>(reply.substr(1)) : std::nullopt;
}

std::string TcpStore::local_address() {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    return sock_.valid() ? sock_.local_address() : std::string();
  } catch (const Error&) {
    return {};
  }
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  std::string reply =
      request(kAdd, key, std::string(reinterpret_cast<char*>(&delta), 8), connect_timeout_);
  int64_t value;
  if (reply.size() != 8)
    KOLO_THROW(ErrorCode::kIo, "rendezvous store at ", host_, ":", port_, ": add of '", key,
               "' answered ", reply.size(), " bytes instead of 8");
  std::memcpy(&value, reply.data(), 8);
  return value;
}

}  // namespace kolo::bootstrap
