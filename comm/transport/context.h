// The transport interface: a Context connects one rank to every other rank of a communicator
// and moves byte ranges between them. Collectives post Transfers and wait for them; a transport
// progresses all posted transfers while waiting, so a ring step's send and receive overlap.
//
// Rules every transport keeps:
// - Transfers to one peer in one direction complete in posting order; the receiver posts the
//   same sequence of sizes as the sender (so message-based transports can match 1:1).
// - Zero-byte transfers complete at once and move nothing.
// - A wait gives up when no byte has moved for the timeout (KOLO_TIMEOUT_SECONDS), or as soon
//   as a peer it waits on is known to be dead: kolo::Error kTimeout / kPeerLost naming the peer
//   and the operation. After any error the context is failed: every later call throws, and the
//   peers are told (abort) so that they fail fast instead of waiting out their own deadline.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/base/error.h"
#include "comm/base/transport_kind.h"

namespace kolo::bootstrap {
class Store;
}

namespace kolo::transport {

class SharedMemory;

struct Transfer {
  enum class Kind : uint8_t { kSend, kRecv };
  Kind kind = Kind::kSend;
  int peer = -1;
  char* data = nullptr;
  size_t bytes = 0;
  size_t done = 0;  // advanced by the transport
  bool complete() const { return done == bytes; }

  static Transfer send(int peer, const void* data, size_t bytes) {
    return {Kind::kSend, peer, static_cast<char*>(const_cast<void*>(data)), bytes, 0};
  }
  static Transfer recv(int peer, void* data, size_t bytes) {
    return {Kind::kRecv, peer, static_cast<char*>(data), bytes, 0};
  }
};

// What every transport's create() needs.
struct ContextOptions {
  std::shared_ptr<bootstrap::Store> store;  // already prefixed for this communicator
  std::string tag;                          // unique name of the communicator within the job
  int rank = 0;
  int size = 1;
  std::vector<int> global_ranks;  // world rank of each member, for error messages
  std::chrono::milliseconds timeout{300000};
  std::string bind_host;  // tcp: address to listen on ("" = automatic)
};

class Context {
 public:
  explicit Context(const ContextOptions& options);
  virtual ~Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual TransportKind kind() const = 0;
  // The shared-memory capability (comm/transport/shared_memory.h), or null when this
  // transport's ranks do not share memory.
  virtual SharedMemory* shared_memory() { return nullptr; }

  // Queues a transfer; `t` must stay alive (and its buffer untouched) until it completes.
  void post(Transfer* t);
  // Progresses every posted transfer until `t` is complete.
  void wait(Transfer* t);
  void wait_all(std::vector<Transfer>& transfers);

  // Names the collective in progress, for error messages ("allreduce of 4096 B"). Cheap: the
  // text is only built when an error needs it. `collective` must be a string literal.
  void set_operation(const char* collective, size_t bytes) {
    collective_ = collective;
    operation_bytes_ = bytes;
  }
  std::string operation() const;
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

  // "rank 3" or "rank 3 (world rank 7)".
  std::string describe_peer(int peer) const;
  // Marks the context failed and tells the peers; called on any error inside a collective.
  // The reason is also left in the store, so that a rank which only sees this rank abort can
  // report the root cause (the rank that really died) instead of just its neighbour.
  void fail(const std::string& why);
  bool failed() const { return !failure_.empty(); }

 protected:
  virtual void do_post(Transfer* t) = 0;
  // Progresses until `t` completes or throws, building errors with throw_timeout() and
  // throw_peer_lost().
  virtual void do_wait(Transfer* t) = 0;
  // Tells peers that this rank gave up (best effort, never throws).
  virtual void do_abort() noexcept = 0;

  [[noreturn]] void throw_timeout(int peer) const;
  [[noreturn]] void throw_peer_lost(int peer, const std::string& how) const;

  int rank_;
  int size_;
  std::shared_ptr<bootstrap::Store> store_;  // for abort reasons: "abort/<rank>"
  std::vector<int> global_ranks_;
  std::chrono::milliseconds timeout_;
  const char* collective_ = "setup";
  size_t operation_bytes_ = 0;
  std::string failure_;
};

// Creates the context of the given (resolved, not kAuto) kind.
std::unique_ptr<Context> create_context(TransportKind kind, const ContextOptions& options);

}  // namespace kolo::transport
