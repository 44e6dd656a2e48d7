// Socket: thin RAII wrapper over BSD sockets with deadlines.
#include "comm/net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "comm/base/error.h"

namespace kolo::net {
namespace {

sockaddr_in resolve(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (host.empty() || host == "0.0.0.0") {
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    return addr;
  }
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1) return addr;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &result);
  KOLO_CHECK_ARG(rc == 0 && result != nullptr, "cannot resolve host '", host,
                 "': ", gai_strerror(rc));
  addr.sin_addr = reinterpret_cast<sockaddr_in*>(result->ai_addr)->sin_addr;
  freeaddrinfo(result);
  return addr;
}

std::string format(const sockaddr_in& addr) {
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &addr.sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(ntohs(addr.sin_port));
}

// Waits until fd is ready for `events` or the deadline passes; false on timeout.
bool wait_ready(int fd, short events, Deadline deadline) {
  while (true) {
    int ms = poll_timeout_ms(deadline, 1000);
    pollfd pfd{fd, events, 0};
    int rc = ::poll(&pfd, 1, ms);
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) KOLO_THROW_ERRNO("poll");
    if (Clock::now() >= deadline) return false;
  }
}

}  // namespace

int poll_timeout_ms(Deadline deadline, int cap_ms) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, cap_ms));
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    peer_ = std::move(other.peer_);
    fd_ = other.release();
  }
  return *this;
}

int Socket::release() {
  int fd = fd_;
  fd_ = -1;
  peer_.clear();
  return fd;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  peer_.clear();
}

Socket Socket::listen(const std::string& host, int port, int backlog) {
  Socket sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) KOLO_THROW_ERRNO("socket");
  int one = 1;
  ::setsockopt(sock.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr = resolve(host, port);
  if (::bind(sock.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    KOLO_THROW_ERRNO("bind to ", format(addr));
  if (::listen(sock.fd(), backlog) != 0) KOLO_THROW_ERRNO("listen on ", format(addr));
  sock.set_nonblocking();
  return sock;
}

namespace {

// Errors after which a later attempt may succeed: nothing listens yet, or the route or the host
// is not up yet (a link that comes up late). Anything else (a bad address) fails at once.
bool retryable(int error) {
  return error == ECONNREFUSED || error == ETIMEDOUT || error == EINTR || error == ECONNRESET ||
         error == EAGAIN || error == EHOSTUNREACH || error == ENETUNREACH;
}

}  // namespace

// Non-blocking, so that an address that drops the SYN (a firewall) is given up at the deadline
// instead of after the kernel's two minutes of SYN retries.
Socket Socket::connect(const std::string& host, int port, Deadline deadline) {
  sockaddr_in addr = resolve(host, port);
  auto backoff = std::chrono::milliseconds(1);
  while (true) {
    Socket sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!sock.valid()) KOLO_THROW_ERRNO("socket");
    int error = 0;
    if (::connect(sock.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      error = errno;
      if (error == EINPROGRESS) {
        if (wait_ready(sock.fd(), POLLOUT, deadline)) {
          socklen_t len = sizeof error;
          if (::getsockopt(sock.fd(), SOL_SOCKET, SO_ERROR, &error, &len) != 0) error = errno;
        } else {
          error = ETIMEDOUT;  // no answer at all before the deadline
        }
      }
    }
    if (error == 0) {
      sock.set_nodelay();
      sock.peer_ = format(addr);
      return sock;
    }
    errno = error;
    if (!retryable(error)) KOLO_THROW_ERRNO("connect to ", format(addr));
    if (Clock::now() + backoff >= deadline)
      KOLO_THROW(ErrorCode::kTimeout, "could not connect to ", format(addr),
                 " before the deadline (", std::strerror(error),
                 "; is the peer running and reachable? KOLO_TIMEOUT_SECONDS)");
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
}

Socket Socket::accept(Deadline deadline) {
  while (true) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      Socket sock(fd);
      sock.set_nodelay();
      (void)sock.peer_name();  // remembered
      return sock;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      KOLO_THROW_ERRNO("accept");
    if (!wait_ready(fd_, POLLIN, deadline)) return Socket();
  }
}

int Socket::local_port() const {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    KOLO_THROW_ERRNO("getsockname");
  return ntohs(addr.sin_port);
}

std::string Socket::local_address() const {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    KOLO_THROW_ERRNO("getsockname");
  std::string text = format(addr);
  return text.substr(0, text.rfind(':'));
}

std::string Socket::peer_name() const {
  if (peer_.empty()) {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
    peer_ = format(addr);
  }
  return peer_;
}

void Socket::set_nonblocking() {
  int flags = ::fcntl(fd_, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK) != 0) KOLO_THROW_ERRNO("fcntl");
}

void Socket::set_nodelay() {
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void Socket::set_buffer_sizes(int bytes) {
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

void Socket::send_all(const void* data, size_t bytes, Deadline deadline) {
  auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd_, p, bytes, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
      KOLO_THROW(ErrorCode::kPeerLost, "connection to ", peer_name(), " closed while sending");
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      KOLO_THROW_ERRNO("send to ", peer_name());
    if (!wait_ready(fd_, POLLOUT, deadline))
      KOLO_THROW(ErrorCode::kTimeout, "send to ", peer_name(), " timed out");
  }
}

void Socket::recv_all(void* data, size_t bytes, Deadline deadline) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(fd_, p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0 || (n < 0 && errno == ECONNRESET))
      KOLO_THROW(ErrorCode::kPeerLost, "connection to ", peer_name(), " closed while receiving");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      KOLO_THROW_ERRNO("recv from ", peer_name());
    if (!wait_ready(fd_, POLLIN, deadline))
      KOLO_THROW(ErrorCode::kTimeout, "receive from ", peer_name(), " timed out");
  }
}

std::string routable_address() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "127.0.0.1";
  std::string found = "127.0.0.1";
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    auto* in = reinterpret_cast<sockaddr_in*>(it->ifa_addr);
    if (ntohl(in->sin_addr.s_addr) >> 24 == 127) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    found = text;
    break;
  }
  ::freeifaddrs(list);
  return found;
}

void require_ipv4_host(const std::string& host, const std::string& setting) {
  try {
    (void)resolve(host, 0);
  } catch (const Error& e) {
    KOLO_THROW(e.code(), setting, "='", host, "': ", e.message(),
               host.find(':') != std::string::npos
                   ? " (kolo takes an IPv4 address or a host name: no IPv6 address, and the port "
                     "goes in its own variable)"
                   : "");
  }
}

}  // namespace kolo::net
