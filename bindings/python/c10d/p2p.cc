// P2p: torch's send and recv over per-(sender, receiver, tag) channels of two ranks.
#include "bindings/python/c10d/p2p.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "bindings/python/c10d/process_group.h"
#include "bindings/python/c10d/store.h"
#include "bindings/python/c10d/tensors.h"
#include "comm/base/error.h"
#include "comm/bootstrap/host.h"

namespace kolo::c10d_backend {

// A channel's Communicator is made by its first message, on its worker: both ends get there
// when each posts its first message, and neither the caller nor other channels wait for it.
struct P2p::Channel {
  Channel(c10::intrusive_ptr<::c10d::Store> store, int rank, CommunicatorOptions options,
          std::string name, std::function<void()> check_peer)
      : store(std::move(store)),
        rank(rank),
        options(options),
        name(std::move(name)),
        check_peer(std::move(check_peer)) {}

  // On the worker: the Communicator, made now if this is the first message. A channel that
  // could not be made fails every later message with the same error.
  Communicator& communicator() {
    if (failed) std::rethrow_exception(failed);
    if (!comm) {
      try {
        comm =
            Communicator::create(std::make_shared<C10dStore>(store, check_peer), rank, 2, options);
        comm->set_busy_polling(false);
      } catch (const Error& e) {
        std::string why = name + ": ";
        if (e.code() == ErrorCode::kTimeout)
          why += std::string("the peer posted no matching ") + (rank == 0 ? "recv" : "send") +
                 " within the group's timeout (" + std::to_string(options.timeout->count()) +
                 " ms): ";
        failed = std::make_exception_ptr(Error(e.code(), why + e.message()));
        std::rethrow_exception(failed);
      }
    }
    return *comm;
  }

  // Runs one message on the worker: a broadcast from the sender. kolo's errors say which
  // message; the channel's own message numbers its two ranks, which the text says, since they
  // are not the group's ("lost rank 0" on the group's rank 0 meant its peer, the sender).
  void transfer(const Buffer& b) {
    Communicator& c = communicator();
    try {
      // As bytes: torch's send and recv match sizes, not dtypes.
      c.broadcast(b.data(), b.count * dtype_size(b.dtype), DType::kUInt8, 0);
    } catch (const Error& e) {
      std::string why = name + ": ";
      if (e.code() == ErrorCode::kMismatch) why += "the send and the recv differ in size: ";
      if (e.code() == ErrorCode::kPeerLost) why += "the peer was lost: ";
      throw Error(
          e.code(),
          why + "(in the channel's numbering, rank 0 sends and rank 1 receives) " + e.message());
    }
  }

  c10::intrusive_ptr<::c10d::Store> store;  // the group's, prefixed for this channel
  int rank;                                 // 0: this rank sends on it, 1: it receives
  CommunicatorOptions options;
  std::string name;                  // "send to rank 2 (tag 0)" or "recv from rank 0 (tag 0)"
  std::function<void()> check_peer;  // throws kPeerLost once the peer's process has exited
  std::shared_ptr<Communicator> comm;
  std::exception_ptr failed;
  WorkQueue queue;  // last: its thread stops before the rest goes
};

P2p::P2p(c10::intrusive_ptr<::c10d::Store> store, int rank, int size, CommunicatorOptions options)
    : store_(std::move(store)), rank_(rank), size_(size), options_(options) {
  // MPI makes communicators by collective calls without a deadline; channels come and go
  // between two ranks at a time, so they use tcp where the group runs over MPI.
  if (options_.transport == TransportKind::kMpi) options_.transport = TransportKind::kTcp;
  // Where this rank's process runs, for peers that wait for it to make a channel: a peer on
  // the same host can tell that the process has exited (a recv from it waited out the group's
  // timeout, 30 minutes by default, to report a timeout).
  const std::string where =
      bootstrap::host_identity() + "\n" + std::to_string(static_cast<int>(::getpid()));
  store_->set(process_key(rank_), std::vector<uint8_t>(where.begin(), where.end()));
}

std::string P2p::process_key(int rank) {
  return "kolo.p2p.process/" + std::to_string(rank);
}

void P2p::check_alive(int peer) const {
  const std::string key = process_key(peer);
  if (!store_->check({key})) return;  // an older peer that does not say
  const std::vector<uint8_t> value = store_->get(key);
  const std::string text(value.begin(), value.end());
  const size_t newline = text.rfind('\n');
  if (newline == std::string::npos || text.substr(0, newline) != bootstrap::host_identity())
    return;  // another host: its process cannot be looked at from here
  const int pid = std::atoi(text.c_str() + newline + 1);
  if (pid > 0 && bootstrap::process_exited(pid))
    KOLO_THROW(ErrorCode::kPeerLost, "rank ", peer, "'s process (pid ", pid,
               ") has exited without making the matching call");
}

P2p::~P2p() = default;

void P2p::check_peer(int peer, const char* op, const char* role) const {
  KOLO_CHECK_ARG(peer >= 0 && peer < size_, op, ": ", role, " rank ", peer,
                 " is not in the group (ranks 0 to ", size_ - 1, ")");
  KOLO_CHECK_ARG(peer != rank_, op, ": ", role, " rank ", peer,
                 " is this rank; kolo's process group does not send to itself");
}

P2p::Channel& P2p::channel(int src, int dst, int tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = channels_[{src, dst, tag}];
  if (!slot) {
    const std::string key = "kolo.p2p/" + std::to_string(src) + "/" + std::to_string(dst) + "/" +
                            std::to_string(tag) + "/";
    const std::string name = src == rank_ ? "send to rank " + std::to_string(dst)
                                          : "recv from rank " + std::to_string(src);
    const int peer = src == rank_ ? dst : src;
    slot = std::make_unique<Channel>(
        c10::make_intrusive<::c10d::PrefixStore>(key, store_), src == rank_ ? 0 : 1, options_,
        name + " (tag " + std::to_string(tag) + ")", [this, peer] { check_alive(peer); });
  }
  return *slot;
}

c10::intrusive_ptr<Work> P2p::post(const at::Tensor& tensor, int peer, int tag, bool sending) {
  const char* op = sending ? "send" : "recv";
  check_peer(peer, op, sending ? "destination" : "source");
  Buffer b = moved(tensor, std::string(op) + ": tensor");
  Channel& c = sending ? channel(rank_, peer, tag) : channel(peer, rank_, tag);
  auto work =
      c10::make_intrusive<Work>(rank_, sending ? ::c10d::OpType::SEND : ::c10d::OpType::RECV,
                                std::vector<at::Tensor>{tensor});
  if (!sending) work->set_source_rank(peer);
  c.queue.submit(work, [&c, b, tensor, sending] {
    c.transfer(b);
    if (!sending) copy_back(b, tensor);
  });
  return work;
}

c10::intrusive_ptr<Work> P2p::send(const at::Tensor& tensor, int dst, int tag) {
  return post(tensor, dst, tag, true);
}

c10::intrusive_ptr<Work> P2p::recv(const at::Tensor& tensor, int src, int tag) {
  return post(tensor, src, tag, false);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupKolo::send(std::vector<at::Tensor>& tensors,
                                                        int dstRank, int tag) {
  return p2p_->send(single(tensors, "send"), dstRank, tag);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupKolo::recv(std::vector<at::Tensor>& tensors,
                                                        int srcRank, int tag) {
  return p2p_->recv(single(tensors, "recv"), srcRank, tag);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupKolo::recvAnysource(std::vector<at::Tensor>&, int) {
  KOLO_THROW(ErrorCode::kInvalidArgument,
             "recv without a source rank: kolo's process group receives from a named rank only "
             "(pass src=)");
}

}  // namespace kolo::c10d_backend
