// TcpStore client and event-driven TcpStoreServer.
#include "comm/bootstrap/tcp_store.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "comm/base/env.h"
#include "comm/base/error.h"
#include "comm/base/log.h"
#include "comm/net/auth.h"

namespace kolo::bootstrap {
namespace {

constexpr uint8_t kSet = 1, kGet = 2, kAdd = 3;
constexpr size_t kHeaderBytes = 1 + 4 + 8;
constexpr uint32_t kMaxKey = 4096;
constexpr uint64_t kMaxValue = 64ull << 20;
constexpr auto kHandshakeTimeout = std::chrono::seconds(10);
// Connections still in the handshake at once; a new one beyond this evicts the oldest, so idle
// strangers cannot use up the descriptors or keep a rank out.
constexpr size_t kMaxPending = 64;

std::string encode_response(const std::string& value) {
  std::string out(1 + 8, '\0');
  uint64_t len = value.size();
  std::memcpy(out.data() + 1, &len, 8);
  return out + value;
}

}  // namespace

// One client connection as the server sees it.
struct Connection {
  net::Socket sock;
  std::string peer;
  net::Challenge challenge{};
  bool authenticated = false;
  net::Deadline handshake_deadline;
  std::string in, out;
};

struct TcpStoreServer::State {
  std::string secret = net::job_secret();
  std::map<std::string, std::string> values;
  std::map<std::string, std::vector<int>> waiters;  // key -> fds of connections in get()
  std::map<int, Connection> conns;                  // by fd
};

TcpStoreServer::TcpStoreServer(const std::string& host, int port)
    : listener_(net::Socket::listen(host, port)),
      port_(listener_.local_port()),
      state_(std::make_unique<State>()) {
  thread_ = std::thread([this] { serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

namespace {

void reject(std::map<int, Connection>& conns, int fd, const std::string& why) {
  KOLO_LOG(kWarning, "store: refused connection from ", conns[fd].peer, ": ", why);
  conns.erase(fd);
}

// Parses and answers every complete request in c.in; returns false to close the connection.
bool handle_requests(Connection& c, int fd, std::map<std::string, std::string>& values,
                     std::map<std::string, std::vector<int>>& waiters, std::string& why) {
  while (c.in.size() >= kHeaderBytes) {
    uint8_t cmd = static_cast<uint8_t>(c.in[0]);
    uint32_t key_len;
    uint64_t value_len;
    std::memcpy(&key_len, c.in.data() + 1, 4);
    std::memcpy(&value_len, c.in.data() + 5, 8);
    if (cmd < kSet || cmd > kAdd || key_len > kMaxKey || value_len > kMaxValue) {
      why = "malformed request (cmd " + std::to_string(cmd) + ", key " + std::to_string(key_len) +
            " B, value " + std::to_string(value_len) + " B)";
      return false;
    }
    if (c.in.size() < kHeaderBytes + key_len + value_len) return true;
    std::string key = c.in.substr(kHeaderBytes, key_len);
    std::string value = c.in.substr(kHeaderBytes + key_len, value_len);
    c.in.erase(0, kHeaderBytes + key_len + value_len);
    if (cmd == kSet) {
      values[key] = value;
      c.out += encode_response("");
    } else if (cmd == kAdd) {
      int64_t delta = 0;
      if (value.size() != 8) {
        why = "malformed add";
        return false;
      }
      std::memcpy(&delta, value.data(), 8);
      auto it = values.find(key);
      int64_t now = 0;
      try {
        now = add_to_counter(key, it == values.end() ? nullptr : &it->second, delta);
      } catch (const Error& e) {
        why = e.what();  // the connection closes; the server and its other clients go on
        return false;
      }
      values[key] = std::to_string(now);
      c.out += encode_response(std::string(reinterpret_cast<char*>(&now), 8));
    } else if (values.count(key)) {
      c.out += encode_response(values[key]);
    } else {
      waiters[key].push_back(fd);  // answered by serve() once the key is set
    }
  }
  return true;
}

}  // namespace

void TcpStoreServer::serve() {
  State& s = *state_;
  while (!stop_) {
    std::vector<pollfd> fds{{listener_.fd(), POLLIN, 0}};
    for (auto& [fd, c] : s.conns)
      fds.push_back({fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
    if (::poll(fds.data(), fds.size(), 100) < 0 && errno != EINTR) break;

    // Closed after this round's poll results are handled (their fd numbers stay unused until then).
    std::vector<int> evicted;
    if (fds[0].revents & POLLIN) {
      while (true) {
        net::Socket sock;
        try {
          sock = listener_.accept(net::Clock::now());
        } catch (const std::exception& e) {  // EMFILE and the like: try again on the next poll
          KOLO_LOG(kWarning, "store: accept failed: ", e.what());
          break;
        }
        if (!sock.valid()) break;
        size_t pending = 0;
        int oldest = -1;
        for (auto& [other, c] : s.conns) {
          if (c.authenticated || std::find(evicted.begin(), evicted.end(), other) != evicted.end())
            continue;
          ++pending;
          if (oldest < 0 || c.handshake_deadline < s.conns[oldest].handshake_deadline)
            oldest = other;
        }
        if (pending >= kMaxPending && oldest >= 0) evicted.push_back(oldest);
        int fd = sock.fd();
        Connection c;
        c.peer = sock.peer_name();
        c.challenge = net::make_challenge();
        c.out.assign(reinterpret_cast<char*>(c.challenge.data()), c.challenge.size());
        c.handshake_deadline = net::Clock::now() + kHandshakeTimeout;
        c.sock = std::move(sock);
        s.conns.emplace(fd, std::move(c));
      }
    }
    std::vector<std::pair<int, std::string>> to_close;
    for (size_t i = 1; i < fds.size(); ++i) {
      int fd = fds[i].fd;
      auto it = s.conns.find(fd);
      if (it == s.conns.end()) continue;
      Connection& c = it->second;
      if (fds[i].revents & POLLOUT) {
        ssize_t n = ::send(fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
        if (n > 0) c.out.erase(0, static_cast<size_t>(n));
      }
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[65536];
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) {
          if (!c.authenticated)
            to_close.push_back({fd, "closed during the handshake"});
          else
            to_close.push_back({fd, ""});
          continue;
        }
        if (n > 0) c.in.append(buf, static_cast<size_t>(n));
      }
      if (!c.authenticated) {
        if (c.in.size() >= net::kHelloBytes) {
          try {
            net::verify_hello(reinterpret_cast<const uint8_t*>(c.in.data()), c.challenge, s.secret);
            c.in.erase(0, net::kHelloBytes);
            c.authenticated = true;
            c.out.push_back('\0');
          } catch (const Error& e) {
            uint8_t status = std::strstr(e.what(), "version") ? 1 : 2;
            ::send(fd, &status, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            to_close.push_back({fd, e.what()});
            continue;
          }
        } else if (net::Clock::now() > c.handshake_deadline) {
          to_close.push_back({fd, "no handshake within 10 s"});
          continue;
        }
      }
      if (c.authenticated) {
        std::string why;
        if (!handle_requests(c, fd, s.values, s.waiters, why)) {
          to_close.push_back({fd, why});
          continue;
        }
      }
    }
    for (int fd : evicted)
      if (std::find_if(to_close.begin(), to_close.end(),
                       [fd](const auto& entry) { return entry.first == fd; }) == to_close.end())
        to_close.push_back({fd, "too many connections waiting for the handshake"});
    for (auto& [fd, why] : to_close) {
      if (why.empty())
        s.conns.erase(fd);
      else
        reject(s.conns, fd, why);
      for (auto& [key, list] : s.waiters) std::erase(list, fd);
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

TcpStore::TcpStore(std::string host, int port, int rank, std::chrono::milliseconds timeout)
    : host_(std::move(host)), port_(port), rank_(rank), connect_timeout_(timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  ensure_connected(connect_timeout_);
}

void TcpStore::ensure_connected(std::chrono::milliseconds timeout) {
  if (sock_.valid()) return;
  auto deadline = net::deadline_after(timeout);
  net::Socket sock = net::Socket::connect(host_, port_, deadline);
  net::client_handshake(sock, {net::Role::kStoreClient, rank_, "store"}, net::job_secret(),
                        deadline);
  sock_ = std::move(sock);
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
    std::string out(len, '\0');
    sock_.recv_all(out.data(), len, deadline);
    return out;
  } catch (const Error& e) {
    sock_.close();  // the stream is out of step now; reconnect on the next request
    if (e.code() == ErrorCode::kTimeout)
      KOLO_THROW(ErrorCode::kTimeout, "store key '", key, "' was not set within ", timeout.count(),
                 " ms (a rank did not arrive; KOLO_TIMEOUT_SECONDS)");
    KOLO_THROW(e.code(), "rendezvous store at ", host_, ":", port_, ": ", e.what());
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

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  std::string reply =
      request(kAdd, key, std::string(reinterpret_cast<char*>(&delta), 8), connect_timeout_);
  int64_t value;
  KOLO_ASSERT(reply.size() == 8);
  std::memcpy(&value, reply.data(), 8);
  return value;
}

}  // namespace kolo::bootstrap
