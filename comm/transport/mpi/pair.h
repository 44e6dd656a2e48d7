// Per-peer state of the mpi transport: the transfers in flight to and from one peer, each
// carried by one or more nonblocking MPI messages on the communicator's private MPI_Comm.
// Transfers complete strictly in posting order per direction, as the Context rules require.
#pragma once

// Only MPI's C API is used: keep the deprecated C++ bindings (and their -Wcast-function-type
// warnings) out of the build.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <cstddef>
#include <deque>
#include <vector>

#include "comm/transport/context.h"

namespace kolo::transport::mpi {

// MPI counts are ints: a transfer is sent as messages of at most this many bytes, and since
// both sides post the same sizes they split it the same way.
inline constexpr size_t kMaxMessageBytes = size_t{1} << 30;
inline constexpr int kDataTag = 0;

class Pair {
 public:
  Pair(MPI_Comm comm, int peer) : comm_(comm), peer_(peer) {}

  // Starts t's messages; returns the first MPI error code, MPI_SUCCESS when all started.
  int post(Transfer* t);
  // Tests every request in flight and completes transfers in posting order; `moved` is set
  // when any request completed. Returns the first MPI error code met.
  int test(bool& moved);
  bool in_flight(const Transfer* t) const;
  // Gives up on everything in flight (best effort, no throw): cancels receives, releases
  // sends to finish on their own. The transfers stay incomplete.
  void abandon() noexcept;

 private:
  struct Op {
    Transfer* t = nullptr;
    std::vector<MPI_Request> requests;  // MPI_REQUEST_NULL once complete
  };
  int test_queue(std::deque<Op>& queue, bool& moved);

  MPI_Comm comm_;
  int peer_;
  std::deque<Op> sends_;
  std::deque<Op> recvs_;
};

}  // namespace kolo::transport::mpi
