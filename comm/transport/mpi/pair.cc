// Pair: cutting transfers into MPI_Isend / MPI_Irecv pieces within the window, testing them,
// and abandoning them when the context fails. The caller holds mpi_world::call_lock() around
// every method.
#include "comm/transport/mpi/pair.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

namespace kolo::transport::mpi {
namespace {

// How long abandon() gives cancelled receives to report back before releasing them.
constexpr auto kCancelGrace = std::chrono::milliseconds(20);

// A receive's data may be handed to MPI once its header (Context::post queues it just before)
// has come in announcing the same size. A larger message would be truncated by MPI, whose
// single-copy path then wrote past the buffer (heap corruption with Open MPI 4.1 when ranks
// passed different alltoall counts); held back, the Context reports the mismatch from the
// header. Everything queued after it waits too, so pieces still match in posting order.
bool header_allows(const Transfer& t) {
  return t.frame == nullptr ||
         (t.frame->transfer.complete() && t.frame->wire.message_bytes == t.bytes);
}

}  // namespace

int Pair::post(Transfer* t) {
  auto& lane = t->kind == Transfer::Kind::kSend ? sends_ : recvs_;
  lane.entries.push_back(Entry{t, 0, 0});
  return start_pieces(lane);
}

int Pair::test(bool& moved) {
  int rc = test_lane(sends_, moved);
  int rc_recv = test_lane(recvs_, moved);
  return rc != MPI_SUCCESS ? rc : rc_recv;
}

// Pieces start strictly in posting order; MPI matches messages between two ranks on one tag in
// order, so they line up one to one with the peer's pieces.
int Pair::start_pieces(Lane& lane) {
  for (size_t i = 0; i < lane.entries.size() && lane.pieces.size() < kWindow; ++i) {
    Entry& e = lane.entries[i];
    if (!lane.send && e.started == 0 && !header_allows(*e.t)) break;
    while (e.started < e.t->bytes && lane.pieces.size() < kWindow) {
      int count = static_cast<int>(std::min(kPieceBytes, e.t->bytes - e.started));
      char* data = e.t->data + e.started;
      MPI_Request request = MPI_REQUEST_NULL;
      int rc = lane.send ? MPI_Isend(data, count, MPI_BYTE, peer_, kDataTag, comm_, &request)
                         : MPI_Irecv(data, count, MPI_BYTE, peer_, kDataTag, comm_, &request);
      if (rc != MPI_SUCCESS) return rc;
      e.started += static_cast<size_t>(count);
      ++e.pending;
      lane.pieces.push_back(Piece{request, lane.base + i});
    }
  }
  return MPI_SUCCESS;
}

int Pair::test_lane(Lane& lane, bool& moved) {
  for (size_t k = 0; k < lane.pieces.size();) {
    int flag = 0;
    int rc = MPI_Test(&lane.pieces[k].request, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return rc;
    if (!flag) {
      ++k;
      continue;
    }
    moved = true;
    --lane.entries[lane.pieces[k].seq - lane.base].pending;
    lane.pieces[k] = lane.pieces.back();  // the order of pieces in flight does not matter
    lane.pieces.pop_back();
  }
  // A later transfer may finish first (a small eager send overtakes a large one); it is
  // reported complete only once everything posted before it is.
  while (!lane.entries.empty()) {
    const Entry& e = lane.entries.front();
    if (e.started < e.t->bytes || e.pending > 0) break;
    e.t->done = e.t->bytes;
    lane.entries.pop_front();
    ++lane.base;
  }
  return start_pieces(lane);
}

bool Pair::queued(const Transfer* t) const {
  const auto& lane = t->kind == Transfer::Kind::kSend ? sends_ : recvs_;
  return std::any_of(lane.entries.begin(), lane.entries.end(),
                     [t](const Entry& e) { return e.t == t; });
}

void Pair::abandon() noexcept {
  abandon_lane(sends_);
  abandon_lane(recvs_);
}

void Pair::abandon_lane(Lane& lane) noexcept {
  std::vector<MPI_Request> pending;
  for (auto& piece : lane.pieces) {
    // A piece whose MPI_Test failed (a truncated receive) was released by MPI already.
    if (piece.request == MPI_REQUEST_NULL) continue;
    // Sends cannot be cancelled reliably; freeing the request lets MPI finish or drop them.
    if (lane.send) {
      MPI_Request_free(&piece.request);
      continue;
    }
    MPI_Cancel(&piece.request);
    pending.push_back(piece.request);
  }
  lane.pieces.clear();
  lane.base += lane.entries.size();
  lane.entries.clear();
  // A cancelled receive completes at once unless it already matched a message; give those a
  // moment, then release them rather than block on a peer that may be gone.
  auto deadline = std::chrono::steady_clock::now() + kCancelGrace;
  while (!pending.empty() && std::chrono::steady_clock::now() < deadline) {
    int flag = 0;
    MPI_Testall(static_cast<int>(pending.size()), pending.data(), &flag, MPI_STATUSES_IGNORE);
    if (flag) return;
    sched_yield();
  }
  for (auto& request : pending)
    if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
}

}  // namespace kolo::transport::mpi
