// Pair: posting a transfer as MPI_Isend / MPI_Irecv messages, testing them, and abandoning
// them when the context fails. The caller holds mpi_world::call_lock() around every method.
#include "comm/transport/mpi/pair.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

namespace kolo::transport::mpi {
namespace {

// How long abandon() gives cancelled receives to report back before releasing them.
constexpr auto kCancelGrace = std::chrono::milliseconds(20);

}  // namespace

int Pair::post(Transfer* t) {
  bool is_send = t->kind == Transfer::Kind::kSend;
  auto& queue = is_send ? sends_ : recvs_;
  queue.push_back(Op{t, {}});
  auto& requests = queue.back().requests;
  // MPI matches messages between two ranks on one tag in order, so the pieces of a transfer and
  // successive transfers line up with the peer's posts one to one.
  for (size_t offset = 0; offset < t->bytes; offset += kMaxMessageBytes) {
    int count = static_cast<int>(std::min(kMaxMessageBytes, t->bytes - offset));
    MPI_Request request = MPI_REQUEST_NULL;
    int rc = is_send
                 ? MPI_Isend(t->data + offset, count, MPI_BYTE, peer_, kDataTag, comm_, &request)
                 : MPI_Irecv(t->data + offset, count, MPI_BYTE, peer_, kDataTag, comm_, &request);
    if (rc != MPI_SUCCESS) return rc;  // the pieces already started stay for abandon()
    requests.push_back(request);
  }
  return MPI_SUCCESS;
}

int Pair::test(bool& moved) {
  int rc = test_queue(sends_, moved);
  int rc_recv = test_queue(recvs_, moved);
  return rc != MPI_SUCCESS ? rc : rc_recv;
}

int Pair::test_queue(std::deque<Op>& queue, bool& moved) {
  for (auto& op : queue) {
    for (auto& request : op.requests) {
      if (request == MPI_REQUEST_NULL) continue;
      int flag = 0;
      int rc = MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) return rc;
      if (flag) moved = true;
    }
  }
  // A later transfer may finish first (a small eager send overtakes a large rendezvous one);
  // it is reported complete only once everything posted before it is.
  while (!queue.empty()) {
    const auto& requests = queue.front().requests;
    bool all_done = std::all_of(requests.begin(), requests.end(),
                                [](MPI_Request r) { return r == MPI_REQUEST_NULL; });
    if (!all_done) break;
    queue.front().t->done = queue.front().t->bytes;
    queue.pop_front();
  }
  return MPI_SUCCESS;
}

bool Pair::in_flight(const Transfer* t) const {
  const auto& queue = t->kind == Transfer::Kind::kSend ? sends_ : recvs_;
  return std::any_of(queue.begin(), queue.end(), [t](const Op& op) { return op.t == t; });
}

void Pair::abandon() noexcept {
  // Sends cannot be cancelled reliably; freeing the request lets MPI finish or drop them.
  for (auto& op : sends_)
    for (auto& request : op.requests)
      if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
  sends_.clear();
  // A cancelled receive completes at once unless it already matched a message; give those a
  // moment, then release them rather than block on a peer that may be gone.
  std::vector<MPI_Request> pending;
  for (auto& op : recvs_)
    for (auto request : op.requests)
      if (request != MPI_REQUEST_NULL) {
        MPI_Cancel(&request);
        pending.push_back(request);
      }
  recvs_.clear();
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
