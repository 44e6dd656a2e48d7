// An NCCL communicator built from kolo's rendezvous store (comm/nccl; built when NCCL is found,
// KOLO_WITH_NCCL): rank 0 asks NCCL for a unique id and publishes it in the store, every rank
// reads it there and joins. The communicator is non-blocking inside: its creation and every
// wait run to a deadline, and an NCCL error or a passed deadline aborts it (ncclCommAbort), so a
// lost rank gives an error on the others instead of a hang. The header needs no CUDA or NCCL
// headers: streams are passed as void* (a cudaStream_t).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "comm/base/dtype.h"
#include "comm/base/error.h"
#include "comm/base/reduce_op.h"
#include "comm/bootstrap/store.h"

namespace kolo::nccl {

// Bytes of NCCL's unique id (ncclUniqueId).
inline constexpr size_t kUniqueIdBytes = 128;

// The id exchange alone, with NCCL's id maker passed in (so it is testable without NCCL's
// runtime): rank 0 stores make_id() under `key`; every rank returns the value found there
// within `timeout`. A value of another length than kUniqueIdBytes throws kMismatch naming the
// key; the store's kTimeout names it too.
std::string share_unique_id(bootstrap::Store& store, const std::string& key, int rank,
                            const std::function<std::string()>& make_id,
                            std::chrono::milliseconds timeout);

class NcclCommunicator {
 public:
  // Joins rank `rank` of `size` on the current CUDA device, the id under `key` in `store`.
  // Throws kInvalidArgument for a rank outside [0, size), kTimeout (after aborting) when the
  // ranks do not all join within `timeout`, which also bounds every later wait().
  NcclCommunicator(bootstrap::Store& store, const std::string& key, int rank, int size,
                   std::chrono::milliseconds timeout);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Queued on `stream`; device pointers. Counts are elements: allreduce and broadcast of
  // `count`, reduce_scatter's output (the input holds size() of them), allgather's input
  // (the output holds size() of them), alltoall's block per peer.
  void allreduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                 void* stream);
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op,
                      void* stream);
  void allgather(const void* send, void* recv, size_t send_count, DType dtype, void* stream);
  void broadcast(const void* send, void* recv, size_t count, DType dtype, int root, void* stream);
  void reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root,
              void* stream);
  void alltoall(const void* send, void* recv, size_t count_per_rank, DType dtype, void* stream);
  // Per-rank counts (size() of them, elements; blocks packed in rank order on both sides):
  // rank r's `send_count` elements land at the offset of counts[r] in every rank's recv (one
  // ncclBroadcast per rank, grouped), and an alltoall whose blocks differ per peer (one group
  // of ncclSend/ncclRecv). A count list of another length is kInvalidArgument.
  void allgatherv(const void* send, size_t send_count, void* recv,
                  const std::vector<size_t>& counts, DType dtype, void* stream);
  void alltoallv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                 const std::vector<size_t>& recv_counts, DType dtype, void* stream);

  // Returns once `stream`'s queued work is done. An NCCL error, or the deadline passing first,
  // aborts the communicator and throws (kPeerLost / kIo / kTimeout) naming this rank; every
  // later call then throws at once.
  void wait(void* stream);
  // Aborts the communicator: queued and later operations fail, with `reason` in the messages.
  void abort(const std::string& reason);
  bool aborted() const { return !abort_reason_.empty(); }

 private:
  // A non-blocking communicator may answer ncclInProgress: polls until it settles, to the
  // deadline.
  void settle(const char* what);
  // NCCL's asynchronous state (ncclSuccess or ncclInProgress, as an int); an error aborts the
  // communicator and throws, naming `what`.
  int async_state(const char* what);
  void check_usable(const char* what) const;
  void check_counts(const std::vector<size_t>& counts, const char* what) const;
  [[noreturn]] void fail(ErrorCode code, const std::string& message);

  int rank_, size_;
  std::chrono::milliseconds timeout_;
  void* comm_ = nullptr;  // ncclComm_t
  std::string abort_reason_;
};

}  // namespace kolo::nccl
