// Per-peer state of the mpi transport: the transfers queued to and from one peer, carried as
// nonblocking MPI messages ("pieces") on the communicator's private MPI_Comm. Transfers
// complete strictly in posting order per direction, as the Context rules require.
#pragma once

// Only MPI's C API is used: comm/CMakeLists.txt defines OMPI_SKIP_MPICXX and MPICH_SKIP_MPICXX,
// which keep the deprecated C++ bindings (and their warnings) out.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "comm/transport/context.h"

namespace kolo::transport::mpi {

// A transfer is cut into pieces of at most kPieceBytes at the same offsets on both sides (the
// receiver posts the same sizes as the sender), and at most kWindow pieces per direction are
// in flight. MPI reports no partial progress of a message, so small pieces are what lets the
// waiter see a large transfer moving and keep polling instead of sleeping (which starves MPI
// protocols that copy through shared-memory fragments). 1 MiB amortizes each message's
// rendezvous handshake and still completes within a few hundred microseconds on shared memory;
// the window bounds the requests tested per pass.
inline constexpr size_t kPieceBytes = size_t{1} << 20;
inline constexpr size_t kWindow = 8;
inline constexpr int kDataTag = 0;

class Pair {
 public:
  Pair(MPI_Comm comm, int peer) : comm_(comm), peer_(peer) {}

  // Queues t and starts what the window allows; returns the first MPI error code met.
  int post(Transfer* t);
  // Tests the pieces in flight, completes transfers in posting order and starts further
  // pieces; `moved` is set when any piece completed. Returns the first MPI error code met.
  int test(bool& moved);
  bool queued(const Transfer* t) const;
  // Gives up on everything queued (best effort, no throw): cancels receives, releases sends to
  // finish on their own. The transfers stay incomplete.
  void abandon() noexcept;

 private:
  struct Entry {
    Transfer* t = nullptr;
    size_t started = 0;  // bytes handed to MPI
    int pending = 0;     // pieces in flight
  };
  struct Piece {
    MPI_Request request = MPI_REQUEST_NULL;
    uint64_t seq = 0;  // of the entry it belongs to
  };
  // One direction to or from the peer.
  struct Lane {
    bool send = false;
    std::deque<Entry> entries;  // posting order
    uint64_t base = 0;          // sequence number of entries.front()
    std::vector<Piece> pieces;  // in flight, at most kWindow
  };

  int start_pieces(Lane& lane);
  int test_lane(Lane& lane, bool& moved);
  static void abandon_lane(Lane& lane) noexcept;

  MPI_Comm comm_;
  int peer_;
  Lane sends_{true, {}, 0, {}};
  Lane recvs_{false, {}, 0, {}};
};

}  // namespace kolo::transport::mpi
