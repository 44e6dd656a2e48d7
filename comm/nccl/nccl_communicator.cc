#include "comm/nccl/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <thread>

#include "comm/base/error.h"
#include "comm/nccl/nccl_map.h"

namespace kolo::nccl {
namespace {

static_assert(sizeof(ncclUniqueId) == kUniqueIdBytes);

using Clock = std::chrono::steady_clock;

ncclComm_t as_comm(void* p) {
  return static_cast<ncclComm_t>(p);
}
cudaStream_t as_stream(void* p) {
  return static_cast<cudaStream_t>(p);
}

// Back-off for the polling loops: spin briefly, then yield, then sleep (ranks may share cores).
void back_off(int& polls) {
  if (++polls < 64) return;
  if (polls < 1024) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(100));
}

}  // namespace

std::string share_unique_id(bootstrap::Store& store, const std::string& key, int rank,
                            const std::function<std::string()>& make_id,
                            std::chrono::milliseconds timeout) {
  if (rank == 0) store.set(key, make_id());
  std::string id = store.get(key, timeout);
  if (id.size() != kUniqueIdBytes) {
    KOLO_THROW(ErrorCode::kMismatch, "nccl: the unique id under store key '", key, "' has ",
               id.size(), " bytes, expected ", kUniqueIdBytes,
               " (another job or kolo version using the same key?)");
  }
  return id;
}

NcclCommunicator::NcclCommunicator(bootstrap::Store& store, const std::string& key, int rank,
                                   int size, std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), timeout_(timeout) {
  KOLO_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "nccl: rank ", rank,
                 " is outside [0, size ", size, ")");
  KOLO_CHECK_ARG(timeout.count() > 0, "nccl: timeout must be positive, got ", timeout.count(),
                 " ms");
  const std::string bytes = share_unique_id(
      store, key, rank,
      [] {
        ncclUniqueId id;
        check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
        return std::string(reinterpret_cast<const char*>(&id), sizeof id);
      },
      timeout);
  ncclUniqueId id;
  std::memcpy(&id, bytes.data(), sizeof id);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so joining and every wait run to kolo's deadline
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRankConfig(&comm, size, id, rank, &config), "ncclCommInitRankConfig");
  comm_ = comm;
  try {
    settle("joining the communicator");
  } catch (...) {
    abort("joining failed");  // a no-op when settle() has aborted already
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;
  // An aborted communicator is already gone; a healthy one is destroyed once its work ends.
  if (!aborted()) ncclCommDestroy(as_comm(comm_));
}

void NcclCommunicator::fail(ErrorCode code, const std::string& message) {
  abort(message);
  KOLO_THROW(code, "nccl rank ", rank_, " of ", size_, ": ", message,
             "; the communicator was aborted");
}

int NcclCommunicator::async_state(const char* what) {
  ncclResult_t state = ncclSuccess;
  check_nccl(ncclCommGetAsyncError(as_comm(comm_), &state), "ncclCommGetAsyncError");
  if (state != ncclSuccess && state != ncclInProgress) {
    const char* last = ncclGetLastError(as_comm(comm_));
    fail(state == ncclRemoteError ? ErrorCode::kPeerLost : ErrorCode::kIo,
         std::string(what) + " failed: " + ncclGetErrorString(state) +
             (last != nullptr && *last != '\0' ? std::string(" (") + last + ")" : ""));
  }
  return state;
}

void NcclCommunicator::settle(const char* what) {
  const auto deadline = Clock::now() + timeout_;
  int polls = 0;
  while (async_state(what) == ncclInProgress) {
    if (Clock::now() > deadline) {
      fail(ErrorCode::kTimeout, std::string(what) + " did not finish within " +
                                    std::to_string(timeout_.count()) + " ms");
    }
    back_off(polls);
  }
}

void NcclCommunicator::check_usable(const char* what) const {
  if (aborted()) {
    KOLO_THROW(ErrorCode::kPeerLost, "nccl rank ", rank_, " of ", size_, ": ", what,
               " on an aborted communicator (", abort_reason_, ")");
  }
}

void NcclCommunicator::abort(const std::string& reason) {
  if (aborted() || comm_ == nullptr) return;
  abort_reason_ = reason.empty() ? "aborted" : reason;
  ncclCommAbort(as_comm(comm_));
}

void NcclCommunicator::allreduce(const void* send, void* recv, size_t count, DType dtype,
                                 ReduceOp op, void* stream) {
  check_usable("allreduce");
  check_nccl(ncclAllReduce(send, recv, count, nccl_dtype(dtype), nccl_op(op, size_), as_comm(comm_),
                           as_stream(stream)),
             "ncclAllReduce", as_comm(comm_));
  settle("ncclAllReduce");
}

void NcclCommunicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                                      ReduceOp op, void* stream) {
  check_usable("reduce_scatter");
  check_nccl(ncclReduceScatter(send, recv, recv_count, nccl_dtype(dtype), nccl_op(op, size_),
                               as_comm(comm_), as_stream(stream)),
             "ncclReduceScatter", as_comm(comm_));
  settle("ncclReduceScatter");
}

void NcclCommunicator::allgather(const void* send, void* recv, size_t send_count, DType dtype,
                                 void* stream) {
  check_usable("allgather");
  check_nccl(
      ncclAllGather(send, recv, send_count, nccl_dtype(dtype), as_comm(comm_), as_stream(stream)),
      "ncclAllGather", as_comm(comm_));
  settle("ncclAllGather");
}

void NcclCommunicator::broadcast(const void* send, void* recv, size_t count, DType dtype, int root,
                                 void* stream) {
  check_usable("broadcast");
  KOLO_CHECK_ARG(root >= 0 && root < size_, "nccl broadcast: root ", root, " is outside [0, ",
                 size_, ")");
  check_nccl(
      ncclBroadcast(send, recv, count, nccl_dtype(dtype), root, as_comm(comm_), as_stream(stream)),
      "ncclBroadcast", as_comm(comm_));
  settle("ncclBroadcast");
}

void NcclCommunicator::reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                              int root, void* stream) {
  check_usable("reduce");
  KOLO_CHECK_ARG(root >= 0 && root < size_, "nccl reduce: root ", root, " is outside [0, ", size_,
                 ")");
  check_nccl(ncclReduce(send, recv, count, nccl_dtype(dtype), nccl_op(op, size_), root,
                        as_comm(comm_), as_stream(stream)),
             "ncclReduce", as_comm(comm_));
  settle("ncclReduce");
}

void NcclCommunicator::alltoall(const void* send, void* recv, size_t count_per_rank, DType dtype,
                                void* stream) {
  const std::vector<size_t> counts(static_cast<size_t>(size_), count_per_rank);
  alltoallv(send, counts, recv, counts, dtype, stream);
}

void NcclCommunicator::alltoallv(const void* send, const std::vector<size_t>& send_counts,
                                 void* recv, const std::vector<size_t>& recv_counts, DType dtype,
                                 void* stream) {
  check_usable("alltoall");
  check_counts(send_counts, "alltoall send counts");
  check_counts(recv_counts, "alltoall receive counts");
  const ncclDataType_t type = nccl_dtype(dtype);
  const size_t esize = dtype_size(dtype);
  // One group of a send and a receive per peer (NCCL has no alltoall call).
  check_nccl(ncclGroupStart(), "ncclGroupStart", as_comm(comm_));
  size_t sent = 0, received = 0;
  for (int peer = 0; peer < size_; ++peer) {
    const size_t out = send_counts[static_cast<size_t>(peer)];
    const size_t in = recv_counts[static_cast<size_t>(peer)];
    check_nccl(ncclSend(static_cast<const char*>(send) + sent * esize, out, type, peer,
                        as_comm(comm_), as_stream(stream)),
               "ncclSend", as_comm(comm_));
    check_nccl(ncclRecv(static_cast<char*>(recv) + received * esize, in, type, peer, as_comm(comm_),
                        as_stream(stream)),
               "ncclRecv", as_comm(comm_));
    sent += out;
    received += in;
  }
  check_nccl(ncclGroupEnd(), "ncclGroupEnd", as_comm(comm_));
  settle("alltoall (ncclSend/ncclRecv group)");
}

void NcclCommunicator::allgatherv(const void* send, size_t send_count, void* recv,
                                  const std::vector<size_t>& counts, DType dtype, void* stream) {
  check_usable("allgatherv");
  check_counts(counts, "allgatherv counts");
  KOLO_CHECK_ARG(counts[static_cast<size_t>(rank_)] == send_count, "nccl allgatherv: rank ", rank_,
                 " sends ", send_count, " elements but its count is ",
                 counts[static_cast<size_t>(rank_)]);
  const ncclDataType_t type = nccl_dtype(dtype);
  const size_t esize = dtype_size(dtype);
  check_nccl(ncclGroupStart(), "ncclGroupStart", as_comm(comm_));
  size_t at = 0;
  for (int root = 0; root < size_; ++root) {
    const size_t n = counts[static_cast<size_t>(root)];
    check_nccl(ncclBroadcast(send, static_cast<char*>(recv) + at * esize, n, type, root,
                             as_comm(comm_), as_stream(stream)),
               "ncclBroadcast", as_comm(comm_));
    at += n;
  }
  check_nccl(ncclGroupEnd(), "ncclGroupEnd", as_comm(comm_));
  settle("allgatherv (ncclBroadcast group)");
}

void NcclCommunicator::check_counts(const std::vector<size_t>& counts, const char* what) const {
  KOLO_CHECK_ARG(counts.size() == static_cast<size_t>(size_), "nccl: ", what, ": ", counts.size(),
                 " counts for ", size_, " ranks");
}

void NcclCommunicator::wait(void* stream) {
  check_usable("wait");
  const auto deadline = Clock::now() + timeout_;
  int polls = 0;
  for (;;) {
    const cudaError_t done = cudaStreamQuery(as_stream(stream));
    if (done == cudaSuccess) return;
    if (done != cudaErrorNotReady) {
      fail(ErrorCode::kIo, std::string("the stream failed: ") + cudaGetErrorString(done));
    }
    async_state("an operation");
    if (Clock::now() > deadline) {
      fail(ErrorCode::kTimeout, "the stream's NCCL work did not finish within " +
                                    std::to_string(timeout_.count()) +
                                    " ms (a rank lost or not calling the same collective?)");
    }
    back_off(polls);
  }
}

}  // namespace kolo::nccl
