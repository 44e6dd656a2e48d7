// Context: the transport-independent part (failure state, error messages, factory).
#include "comm/transport/context.h"

#include <string_view>

#include "comm/base/algorithm.h"
#include "comm/base/dtype.h"
#include "comm/base/log.h"
#include "comm/base/reduce_op.h"
#include "comm/bootstrap/store.h"
#include "comm/transport/shm/context.h"
#include "comm/transport/tcp/context.h"
#include "kolo_config.h"
#if KOLO_HAVE_MPI
#include "comm/transport/mpi/context.h"
#endif
#if KOLO_HAVE_UCX
#include "comm/transport/ucx/context.h"
#endif

namespace kolo::transport {

Context::Context(const ContextOptions& options)
    : rank_(options.rank),
      size_(options.size),
      store_(options.store),
      global_ranks_(options.global_ranks),
      hosts_(options.hosts),
      timeout_(options.timeout) {
  if (global_ranks_.empty())
    for (int r = 0; r < size_; ++r) global_ranks_.push_back(r);
}

void Context::post(Transfer* t) {
  if (failed()) throw_already_failed();
  KOLO_ASSERT(t->peer >= 0 && t->peer < size_ && t->peer != rank_);
  if (t->bytes == 0) return;
  try {
    Frame* frame = take_frame();
    if (t->kind == Transfer::Kind::kSend) {
      frame->wire = {t->bytes, call_};
      frame->transfer = Transfer::send(t->peer, &frame->wire, sizeof frame->wire);
    } else {
      frame->transfer = Transfer::recv(t->peer, &frame->wire, sizeof frame->wire);
    }
    do_post(&frame->transfer);
    t->frame = frame;
    do_post(t);
  } catch (const Error& e) {
    fail(e.what());
    throw;
  }
}

// A received transfer's header is checked as soon as it is in, before waiting for the data: a
// peer that sends fewer bytes would otherwise leave this rank waiting for the rest.
void Context::wait(Transfer* t) {
  if (t->complete() && t->frame == nullptr) return;
  if (failed()) throw_already_failed();
  try {
    if (Frame* frame = t->frame) {
      if (t->kind == Transfer::Kind::kRecv) {
        if (!frame->transfer.complete()) do_wait(&frame->transfer);
        check_frame(*t);
      }
      if (!t->complete()) do_wait(t);
      // Sends too: a transfer's header completes before it (posting order).
      t->frame = nullptr;
      free_frames_.push_back(frame);
      return;
    }
    do_wait(t);
  } catch (const Error& e) {
    fail(e.what());
    throw;
  }
}

Frame* Context::take_frame() {
  if (free_frames_.empty()) {
    frames_.push_back(std::make_unique<Frame>());
    return frames_.back().get();
  }
  Frame* frame = free_frames_.back();
  free_frames_.pop_back();
  return frame;
}

void Context::check_frame(const Transfer& t) const {
  const Frame::Wire& wire = t.frame->wire;
  check_call(t.peer, wire.call);
  if (wire.message_bytes != t.bytes)
    KOLO_THROW(ErrorCode::kMismatch, where(), ": ", describe_peer(t.peer), " sent a message of ",
               wire.message_bytes, " B where this rank expects ", t.bytes, " B in ",
               describe_call(call_), " (the ranks passed different counts)");
}

void Context::check_call(int peer, const CallSignature& theirs) const {
  if (theirs == call_) return;
  KOLO_THROW(ErrorCode::kMismatch, where(),
             ": ranks called different "
             "collectives: ",
             describe_peer(peer), " is in ", describe_call(theirs), ", this rank in ",
             describe_call(call_));
}

uint32_t call_kind(uint8_t collective, uint8_t dtype, uint8_t op, uint8_t algorithm) {
  return uint32_t{collective} | uint32_t{dtype} << 8 | uint32_t{op} << 16 |
         uint32_t{algorithm} << 24;
}

std::string describe_call(const CallSignature& call) {
  const uint32_t collective = call.kind & 0xff, dtype = (call.kind >> 8) & 0xff,
                 op = (call.kind >> 16) & 0xff, algorithm = call.kind >> 24;
  std::string text = "call #" + std::to_string(call.seq) + ", ";
  text += collective <= static_cast<uint32_t>(Collective::kBarrier)
              ? collective_name(static_cast<Collective>(collective))
              : "collective " + std::to_string(collective);
  if (call.bytes > 0) text += " of " + std::to_string(call.bytes) + " B";
  std::string details;
  if (dtype < static_cast<uint32_t>(kNumDTypes)) details = dtype_name(static_cast<DType>(dtype));
  if (op < static_cast<uint32_t>(kNumReduceOps))
    details += (details.empty() ? "" : ", ") + std::string(op_name(static_cast<ReduceOp>(op)));
  if (call.root >= 0)
    details += (details.empty() ? "" : ", ") + ("root " + std::to_string(call.root));
  if (algorithm > 0 && algorithm <= static_cast<uint32_t>(Algorithm::kHierarchical))
    details += (details.empty() ? "" : ", ") +
               ("algorithm " + std::string(algorithm_name(static_cast<Algorithm>(algorithm))));
  return details.empty() ? text : text + " (" + details + ")";
}

void Context::wait_all(std::vector<Transfer>& transfers) {
  for (auto& t : transfers) wait(&t);
}

std::string Context::operation() const {
  if (std::string_view(collective_) == "setup") return "setup";
  return detail::concat(collective_, " of ", operation_bytes_, " B");
}

std::string Context::rank_text(int r) const {
  std::string text = "rank " + std::to_string(r);
  const int world = global_ranks_[static_cast<size_t>(r)];
  if (world != r) text += " (world rank " + std::to_string(world) + ")";
  return text;
}

std::string Context::where() const {
  return operation() + " on " + rank_text(rank_);
}

std::string Context::describe_peer(int peer) const {
  std::string text = rank_text(peer);
  if (static_cast<size_t>(peer) < hosts_.size()) {
    const std::string& host = hosts_[static_cast<size_t>(peer)];
    text += " on host " + host.substr(0, host.find('/'));  // without the boot id
  }
  return text;
}

// kPeerLost as docs/errors.md says, whatever the first error was: the message quotes it, and
// says that it came from an earlier call (a mismatch there is no lost peer).
void Context::throw_already_failed() const {
  KOLO_THROW(ErrorCode::kPeerLost,
             "communicator already failed in an earlier call (create a new communicator to go "
             "on); that call failed with: ",
             failure_);
}

void Context::fail(const std::string& why) {
  if (failed()) return;
  failure_ = why;
  KOLO_LOG(kDebug, transport_name(kind()), " context failed: ", why);
  try {
    // Bounded: the rank hosting the store may be the one that died.
    if (store_)
      store_->set_within("abort/" + std::to_string(rank_), why, std::chrono::milliseconds(500));
  } catch (const Error&) {
    // The store may be gone with the rank that hosted it; the abort below still goes out.
  }
  do_abort();
}

void Context::throw_timeout(int peer) const {
  KOLO_THROW(ErrorCode::kTimeout, where(), ": no progress with ", describe_peer(peer), " for ",
             timeout_.count() / 1000.0,
             " s (the communicator's timeout: KOLO_TIMEOUT_SECONDS, or the one its creator "
             "passed, such as torch.distributed's timeout=); the peer is stuck, dead, or not "
             "calling the same collective");
}

void Context::throw_interrupted(int peer) const {
  KOLO_THROW(ErrorCode::kIo, where(), ": the wait for ", describe_peer(peer),
             " was interrupted by a signal (Ctrl-C), or by kolo_shutdown on another thread: this "
             "rank gave the call up, and the "
             "communicator cannot be used again");
}

void Context::throw_larger_message(int peer, size_t expected_bytes) const {
  const std::string what = expected_bytes > 0
                               ? "the " + std::to_string(expected_bytes) + " B this rank expects"
                               : std::string("this rank expects");
  KOLO_THROW(ErrorCode::kMismatch, where(), ": ", describe_peer(peer),
             " sent a message larger than ", what, " in ", describe_call(call_),
             " (the ranks passed different counts)");
}

void Context::throw_peer_lost(int peer, const std::string& how) const {
  // A peer that aborted left its reason in the store (and, over shared memory, in its segment,
  // readable when the store's host is the rank exiting) before telling us; quote its root cause
  // (the innermost reason) so every rank names the rank that really failed.
  std::string reported;
  try {
    std::string reason = abort_reason(peer);
    if (reason.empty() && store_)
      reason = store_->check("abort/" + std::to_string(peer), std::chrono::milliseconds(20))
                   .value_or("");
    if (!reason.empty()) {
      const std::string marker = "it had failed with: ";
      size_t inner = reason.rfind(marker);
      if (inner != std::string::npos)
        reason = reason.substr(inner + marker.size());
      else if (size_t colon = reason.find("error: "); colon != std::string::npos)
        reason = reason.substr(colon + 7);
      reported = "; " + marker + reason;
    }
  } catch (const Error&) {
    // No reason left behind: the peer died without a word.
  }
  // A peer that found the ranks in different calls gave up for that reason: so does this rank.
  const bool mismatch = reported.find("ranks called different collectives") != std::string::npos ||
                        reported.find("(the ranks passed different counts)") != std::string::npos;
  KOLO_THROW(mismatch ? ErrorCode::kMismatch : ErrorCode::kPeerLost, where(), ": lost ",
             describe_peer(peer), ": ", how, reported);
}

void check_transport_settings() {
  shm::check_settings();
  tcp::check_settings();
}

std::unique_ptr<Context> create_context(TransportKind kind, const ContextOptions& options) {
  switch (kind) {
    case TransportKind::kShm: return shm::create(options);
    case TransportKind::kTcp: return tcp::create(options);
    case TransportKind::kMpi:
#if KOLO_HAVE_MPI
      return mpi::create(options);
#else
      KOLO_THROW(ErrorCode::kInvalidArgument,
                 "transport 'mpi' requested but this kolo was built without MPI "
                 "(KOLO_WITH_MPI)");
#endif
    case TransportKind::kUcx:
#if KOLO_HAVE_UCX
      return ucx::create(options);
#else
      KOLO_THROW(ErrorCode::kInvalidArgument,
                 "transport 'ucx' requested but this kolo was built without UCX "
                 "(KOLO_WITH_UCX; Debian: libucx-dev)");
#endif
    case TransportKind::kAuto: break;
  }
  KOLO_THROW(ErrorCode::kInternal, "create_context needs a resolved transport kind");
}

}  // namespace kolo::transport
