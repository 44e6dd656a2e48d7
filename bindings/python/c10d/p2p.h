// Point-to-point messages of a kolo process group: torch's send and recv (and isend, irecv,
// batch_isend_irecv, which torch builds on them).
//
// kolo's Communicator has collectives only, so each (sender, receiver, tag) gets a channel: a
// 2-rank Communicator (rank 0 the sender, rank 1 the receiver) that the first message on it
// makes on the group's store, and a worker thread of its own. A send is a broadcast from the
// channel's rank 0 and the matching recv is that broadcast on rank 1, so the messages of one
// channel are matched in the order they were posted, as torch's backends match them per pair
// and tag. Channels wait neither for each other nor for the group's collectives: two ranks may
// exchange with isend and irecv in either order. A blocking send returns once the receiver has
// taken the message (MPI's synchronous send): two ranks that both send before they receive wait
// for each other until the group's timeout, so exchange with isend/irecv.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "bindings/python/c10d/work.h"
#include "comm/communicator.h"

namespace kolo::c10d_backend {

class P2p {
 public:
  // `store`: the group's (torch's, prefixed per group); `options`: the group's Communicator's.
  P2p(c10::intrusive_ptr<::c10d::Store> store, int rank, int size, CommunicatorOptions options);
  ~P2p();
  P2p(const P2p&) = delete;
  P2p& operator=(const P2p&) = delete;

  // Checks the arguments on the caller's thread (kInvalidArgument), then queues the message on
  // its channel; the Work completes when it has been handed over.
  c10::intrusive_ptr<Work> send(const at::Tensor& tensor, int dst, int tag);
  c10::intrusive_ptr<Work> recv(const at::Tensor& tensor, int src, int tag);

 private:
  struct Channel;
  Channel& channel(int src, int dst, int tag);
  // send (`sending`) or recv of `tensor` to or from `peer`.
  c10::intrusive_ptr<Work> post(const at::Tensor& tensor, int peer, int tag, bool sending);
  void check_peer(int peer, const char* op, const char* role) const;
  // The store key where a rank records its host and pid; throws kPeerLost when `peer` runs on
  // this host and its process has exited.
  static std::string process_key(int rank);
  void check_alive(int peer) const;

  c10::intrusive_ptr<::c10d::Store> store_;
  int rank_;
  int size_;
  CommunicatorOptions options_;
  std::mutex mutex_;  // guards channels_
  std::map<std::tuple<int, int, int>, std::unique_ptr<Channel>> channels_;
};

}  // namespace kolo::c10d_backend
