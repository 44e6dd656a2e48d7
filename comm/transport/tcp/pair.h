// One connection of the tcp transport: the socket to one peer and the FIFO queues of the
// transfers posted to it. A Pair only moves bytes when asked and never blocks; TcpContext
// decides when to sleep in poll() and turns a closed connection into kPeerLost.
//
// The connection is a plain byte stream in each direction: sends are written back to back and
// receives are filled in posting order, so one receive may span several sends and the other
// way round. Several queued transfers go out (or come in) with one sendmsg/recvmsg.
#pragma once

#include <cstddef>
#include <deque>
#include <string>

#include "comm/net/socket.h"
#include "comm/transport/context.h"

namespace kolo::transport::tcp {

class Pair {
 public:
  Pair(int peer, net::Socket sock);

  void post(Transfer* t);
  // Moves as many bytes as the socket takes or has without blocking; returns the bytes moved.
  // A connection found closed or broken sets closed() instead of throwing.
  size_t progress();
  // The poll() events to wait for while transfers are queued (0 when idle).
  short poll_events() const;
  // Reads poll()'s verdict: a hang-up while sends are queued means they can never complete.
  void note_events(short revents);
  // Half-closes both directions so the peer sees EOF at once (abort); never throws.
  void shutdown() noexcept;

  bool idle() const { return sends_.empty() && recvs_.empty(); }
  bool closed() const { return closed_; }
  const std::string& close_reason() const { return close_reason_; }
  int peer() const { return peer_; }
  int fd() const { return sock_.fd(); }

 private:
  size_t progress_sends();
  size_t progress_recvs();
  void mark_closed(int error);

  int peer_;
  net::Socket sock_;
  std::deque<Transfer*> sends_, recvs_;
  bool closed_ = false;
  std::string close_reason_;
};

}  // namespace kolo::transport::tcp
