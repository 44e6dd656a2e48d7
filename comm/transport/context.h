// The transport interface: a Context connects one rank to every other rank of a communicator
// and moves byte ranges between them. Collectives post Transfers and wait for them; a transport
// progresses all posted transfers while waiting, so a ring step's send and receive overlap.
//
// Rules every transport keeps:
// - Transfers to one peer in one direction complete in posting order; the receiver posts the
//   same sequence of sizes as the sender (so message-based transports can match 1:1).
// - Zero-byte transfers complete at once and move nothing.
// - Every other transfer is preceded by a Frame (posted by Context::post), so a receiver that
//   expects another size or another call fails with kMismatch instead of misreading the stream.
// - A wait gives up when no byte has moved for the timeout (KOLO_TIMEOUT_SECONDS), or as soon
//   as a peer it waits on is known to be dead: kolo::Error kTimeout / kPeerLost naming the peer
//   and the operation. It also gives up when its thread's interrupt hook asks it to (Ctrl-C in
//   Python; comm/base/interrupt.h), checked next to the deadline. After any error the context
//   is failed: every later call throws, and the peers are told (abort) so that they fail fast
//   instead of waiting out their own deadline.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/base/error.h"
#include "comm/base/interrupt.h"
#include "comm/base/transport_kind.h"

namespace kolo::bootstrap {
class Store;
}

namespace kolo::transport {

class SharedMemory;
struct Frame;

// What a collective call is, as every rank must agree. Transports compare it (the shm barrier
// flags carry it, every message is preceded by a header carrying it) so that ranks in different
// calls fail with kMismatch on every rank instead of hanging or mixing bytes.
struct CallSignature {
  uint64_t seq = 0;    // this call's number on the communicator (1 = the first)
  uint64_t bytes = 0;  // the size every rank must agree on (0 where sizes may differ: alltoallv)
  // collective | dtype << 8 | reduce op << 16 (0xff: not applicable) | the algorithm the
  // call asked for << 24 (0: auto; ranks asking for different ones would mix their messages)
  uint32_t kind = 0;
  int32_t root = -1;  // broadcast root, else -1
  bool operator==(const CallSignature&) const = default;
};
uint32_t call_kind(uint8_t collective, uint8_t dtype = 0xff, uint8_t op = 0xff,
                   uint8_t algorithm = 0);
// "call #5, allreduce of 4096 B (float32, sum)".
std::string describe_call(const CallSignature& call);

struct Transfer {
  enum class Kind : uint8_t { kSend, kRecv };
  Kind kind = Kind::kSend;
  int peer = -1;
  char* data = nullptr;
  size_t bytes = 0;
  size_t done = 0;  // advanced by the transport
  bool complete() const { return done == bytes; }
  Frame* frame = nullptr;  // Context: the header posted ahead of this transfer

  static Transfer send(int peer, const void* data, size_t bytes) {
    return {Kind::kSend, peer, static_cast<char*>(const_cast<void*>(data)), bytes, 0};
  }
  static Transfer recv(int peer, void* data, size_t bytes) {
    return {Kind::kRecv, peer, static_cast<char*>(data), bytes, 0};
  }
};

// The header Context::post puts ahead of every non-empty transfer: the size of the message and
// the call it belongs to. The receiver checks it before it waits for the data.
struct Frame {
  struct Wire {
    uint64_t message_bytes;
    CallSignature call;
  } wire{};
  Transfer transfer;
};

// Reads every transport's own settings (KOLO_SHM_*, KOLO_TCP_BUFFER_BYTES) whichever is used,
// throwing kInvalidArgument for a bad one: Communicator::init checks them before any rank
// waits for another.
void check_transport_settings();

// What every transport's create() needs.
struct ContextOptions {
  std::shared_ptr<bootstrap::Store> store;  // already prefixed for this communicator
  std::string tag;                          // unique name of the communicator within the job
  int rank = 0;
  int size = 1;
  std::vector<int> global_ranks;   // world rank of each member, for error messages
  std::vector<std::string> hosts;  // each member's host, for error messages (empty: one host)
  std::chrono::milliseconds timeout{300000};
  std::string bind_host;  // tcp: address to listen on ("" = automatic)
  int host_cpus = 1;      // CPUs the host's ranks may run on together (Communicator::host_cpus)
  bool store_on_loopback = true;  // the job's store is on loopback (CommunicatorOptions's)
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

  // Starts a collective call: names it for error messages ("allreduce of 4096 B"; the text is
  // only built when an error needs it, `collective` must be a string literal) and numbers
  // `call` (its seq is set here) for the agreement checks.
  void begin_call(const char* collective, size_t bytes, CallSignature call) {
    collective_ = collective;
    operation_bytes_ = bytes;
    call.seq = ++calls_;
    call_ = call;
  }
  const CallSignature& call() const { return call_; }
  std::string operation() const;
  // "allreduce of 4096 B on rank 0", with " (world rank 3)" in a sub-communicator: how this
  // context's errors start.
  std::string where() const;
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  // Whether a wait may busy-poll before it sleeps (transports that spin do so only while ranks
  // have cores to spare). Off for a background thread that shares its cores with compute.
  bool busy_polling() const { return busy_polling_; }
  void set_busy_polling(bool allowed) { busy_polling_ = allowed; }

  // "rank 3" or "rank 3 (world rank 7)", and " on host NAME" when the members span hosts.
  std::string describe_peer(int peer) const;
  // "rank 3", or "rank 3 (world rank 7)" in a sub-communicator.
  std::string rank_text(int r) const;
  // Marks the context failed and tells the peers; called on any error inside a collective.
  // The reason is also left in the store, so that a rank which only sees this rank abort can
  // report the root cause (the rank that really died) instead of just its neighbour.
  void fail(const std::string& why);
  bool failed() const { return !failure_.empty(); }
  // kPeerLost for a call on a failed context, quoting the failure.
  [[noreturn]] void throw_already_failed() const;

 protected:
  virtual void do_post(Transfer* t) = 0;
  // Progresses until `t` completes or throws, building errors with check_wait() and
  // throw_peer_lost().
  virtual void do_wait(Transfer* t) = 0;
  // Tells peers that this rank gave up (best effort, never throws; failure_ says why).
  virtual void do_abort() noexcept = 0;
  // Why `peer` gave up, where the transport itself carries it (empty: ask the store).
  virtual std::string abort_reason(int /*peer*/) const { return {}; }

  // Throws kMismatch when a peer's call differs from this rank's, on every rank that sees it.
  void check_call(int peer, const CallSignature& theirs) const;
  [[noreturn]] void throw_timeout(int peer) const;
  // The wait for `peer` was given up because interrupt_requested() said so (a signal): kIo,
  // since the rank itself is fine, but the call is abandoned and the context fails as for any
  // error, so the peers hear that this rank gave up.
  [[noreturn]] void throw_interrupted(int peer) const;
  // A wait loop's check, each time it has looked for progress: gives up on `peer` after the
  // timeout without progress, or when the thread's interrupt hook asks (throw_interrupted).
  void check_wait(std::chrono::steady_clock::duration idle, int peer) const {
    if (idle >= timeout_) throw_timeout(peer);
    if (interrupt_requested()) throw_interrupted(peer);
  }
  [[noreturn]] void throw_peer_lost(int peer, const std::string& how) const;
  // kMismatch for a message from `peer` larger than the receive posted for it (message
  // transports that post the receive before its header is checked); `expected_bytes` is the
  // receive's size where the transport knows it (0: not said).
  [[noreturn]] void throw_larger_message(int peer, size_t expected_bytes = 0) const;

  int rank_;
  int size_;
  std::shared_ptr<bootstrap::Store> store_;  // for abort reasons: "abort/<rank>"
  std::vector<int> global_ranks_;
  std::vector<std::string> hosts_;
  std::chrono::milliseconds timeout_;
  bool busy_polling_ = true;
  const char* collective_ = "setup";
  size_t operation_bytes_ = 0;
  std::string failure_;
  uint64_t calls_ = 0;
  CallSignature call_;

 private:
  Frame* take_frame();
  void check_frame(const Transfer& t) const;
  std::vector<std::unique_ptr<Frame>> frames_;  // every header buffer this context made
  std::vector<Frame*> free_frames_;
};

// Creates the context of the given (resolved, not kAuto) kind.
std::unique_ptr<Context> create_context(TransportKind kind, const ContextOptions& options);

}  // namespace kolo::transport
