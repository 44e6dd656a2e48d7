// TcpStore: the rendezvous store for ranks that are processes. Rank 0 hosts a TcpStoreServer
// (one background thread, event-driven, so a slow or hostile client never blocks the others);
// every rank, rank 0 included, talks to it through a TcpStore client.
//
// Wire format after the handshake (comm/net/auth.h), little endian:
//   request  : cmd u8 (1 set, 2 get, 3 add) | key_len u32 | value_len u64 | key | value
//   response : status u8 (0) | value_len u64 | value       (get answers once the key exists)
// A malformed frame, an oversized key or value, or a failed handshake closes that connection
// only, and is logged.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "comm/bootstrap/store.h"
#include "comm/net/socket.h"

namespace kolo::net {
class Acceptor;
}  // namespace kolo::net

namespace kolo::bootstrap {

// A process's rendezvous stores are numbered (its first init is generation 1, the init after a
// shutdown 2, ...), the same on every rank. A server accepts clients of its own generation only:
// a rank that shut down and initialised again before rank 0 had closed the earlier store is
// refused by it and keeps trying until rank 0's new store is up, instead of joining the old
// one and reading the earlier job's keys.
class TcpStoreServer {
 public:
  // Listens on host:port (port 0: any free port) and serves until destroyed.
  TcpStoreServer(const std::string& host, int port, uint64_t generation = 1);
  ~TcpStoreServer();
  int port() const { return port_; }

 private:
  struct State;
  void serve();

  net::Socket listener_;
  int port_ = 0;
  // Made on the constructing thread: a bad KOLO_SECRET_FILE is the constructor's error, not
  // an exception in the server's thread.
  std::unique_ptr<net::Acceptor> acceptor_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<State> state_;
  std::thread thread_;
};

class TcpStore : public Store {
 public:
  // Connects to host:port, retrying until `timeout` (also while a server of another generation
  // refuses it); `rank` and `generation` are sent in the handshake.
  TcpStore(std::string host, int port, int rank, std::chrono::milliseconds timeout,
           uint64_t generation = 1);
  // Hosts the server in this process too (rank 0).
  void host_server(std::unique_ptr<TcpStoreServer> server) { server_ = std::move(server); }

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::optional<std::string> check(const std::string& key,
                                   std::chrono::milliseconds timeout) override;
  std::string local_address() override;
  void set_within(const std::string& key, const std::string& value,
                  std::chrono::milliseconds timeout) override;

 private:
  std::string request(uint8_t cmd, const std::string& key, const std::string& value,
                      std::chrono::milliseconds timeout);
  void ensure_connected(std::chrono::milliseconds timeout);

  std::string host_;
  int port_;
  int rank_;
  std::chrono::milliseconds connect_timeout_;
  uint64_t generation_;
  std::mutex mutex_;
  net::Socket sock_;
  std::unique_ptr<TcpStoreServer> server_;
};

}  // namespace kolo::bootstrap
