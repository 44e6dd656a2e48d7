// Communicator collectives: argument checks, the single-rank shortcut, in-place handling and
// dispatch to the algorithms in comm/collectives/.
#include <cstring>
#include <numeric>
#include <string_view>

#include "comm/base/env.h"
#include "comm/base/error.h"
#include "comm/base/log.h"
#include "comm/collectives/collectives.h"
#include "comm/collectives/cost_model.h"
#include "comm/communicator.h"
#include "comm/reduce/reduce.h"
#include "comm/transport/context.h"
#include "comm/transport/shm/context.h"

namespace kolo {
namespace {

void check_buffer(const void* ptr, size_t count, const char* collective, const char* which) {
  KOLO_CHECK_ARG(ptr != nullptr || count == 0, collective, ": ", which,
                 " buffer is null but count is ", count);
}

void copy_if_distinct(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
}

std::vector<size_t> prefix_offsets(const std::vector<size_t>& bytes) {
  std::vector<size_t> offsets(bytes.size(), 0);
  if (!bytes.empty()) std::exclusive_scan(bytes.begin(), bytes.end(), offsets.begin(), size_t{0});
  return offsets;
}

}  // namespace

namespace {

bool fits(std::string_view collective, Algorithm algorithm, bool shm, bool shm_direct,
          size_t bytes) {
  const bool allreduce = collective == "allreduce";
  switch (algorithm) {
    case Algorithm::kAuto:
    case Algorithm::kRing: return true;
    case Algorithm::kTree:
    case Algorithm::kHalvingDoubling: return allreduce;
    case Algorithm::kLowLatency:
      return allreduce && shm && bytes <= transport::shm::kSmallSlotBytes;
    case Algorithm::kDirect:
      return shm_direct &&
             (allreduce || collective == "reduce_scatter" || collective == "allgather" ||
              collective == "broadcast" || collective == "alltoall");
    default: return false;
  }
}

}  // namespace

Algorithm Communicator::choose_algorithm(std::string_view collective, size_t bytes,
                                         const CollectiveOptions& options) const {
  const bool shm = shm_ != nullptr, direct = shm && shm_->direct_enabled();
  Algorithm algorithm = options.algorithm;
  // KOLO_ALGORITHM is a preference: it applies where it fits, kolo chooses elsewhere.
  if (algorithm == Algorithm::kAuto && fits(collective, env_algorithm_, shm, direct, bytes))
    algorithm = env_algorithm_;
  KOLO_CHECK_ARG(fits(collective, algorithm, shm, direct, bytes), collective, " of ", bytes,
                 " B: algorithm '", algorithm_name(algorithm), "' is not available with the ",
                 transport_name(transport_), " transport; accepted: auto, ring",
                 collective == "allreduce" ? ", tree, halving_doubling" : "",
                 shm && collective == "allreduce" ? ", low_latency (small messages)" : "",
                 direct ? ", direct" : "");
  if (algorithm != Algorithm::kAuto) return algorithm;
  if (collective == "allreduce")
    return collectives::choose_allreduce(transport_, direct, bytes, size_);
  return fits(collective, Algorithm::kDirect, shm, direct, bytes) ? Algorithm::kDirect
                                                                  : Algorithm::kRing;
}

Algorithm Communicator::begin(const char* collective, size_t bytes,
                              const CollectiveOptions& options) {
  Algorithm algorithm = choose_algorithm(collective, bytes, options);
  if (context_) context_->set_operation(collective, bytes);
  if (algorithm != last_algorithm_ && log::threshold() <= log::Level::kDebug) {
    KOLO_LOG(kDebug, collective, " of ", bytes, " B on ", size_, " ranks over ",
             transport_name(transport_), ": algorithm ", algorithm_name(algorithm));
  }
  last_algorithm_ = algorithm;
  return algorithm;
}

void Communicator::allreduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                             const CollectiveOptions& options) {
  check_buffer(send, count, "allreduce", "send");
  check_buffer(recv, count, "allreduce", "receive");
  const size_t bytes = count * dtype_size(dtype);
  Algorithm algorithm = begin("allreduce", bytes, options);
  if (size_ == 1 || count == 0) {
    copy_if_distinct(recv, send, bytes);
    return;
  }
  switch (algorithm) {
    case Algorithm::kLowLatency:
      return collectives::shm_low_latency_allreduce(*shm_, send, recv, count, dtype, op);
    case Algorithm::kDirect:
      return collectives::shm_direct_allreduce(*shm_, send, recv, count, dtype, op);
    default: break;
  }
  copy_if_distinct(recv, send, bytes);
  switch (algorithm) {
    case Algorithm::kTree: collectives::tree_allreduce(*context_, recv, count, dtype, op); break;
    case Algorithm::kHalvingDoubling:
      collectives::halving_doubling_allreduce(*context_, recv, count, dtype, op);
      break;
    default: collectives::ring_allreduce(*context_, recv, count, dtype, op); break;
  }
}

void Communicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                                  ReduceOp op, const CollectiveOptions& options) {
  check_buffer(send, recv_count, "reduce_scatter", "send");
  check_buffer(recv, recv_count, "reduce_scatter", "receive");
  const size_t bytes = recv_count * dtype_size(dtype);
  Algorithm algorithm = begin("reduce_scatter", bytes * static_cast<size_t>(size_), options);
  if (size_ == 1 || recv_count == 0) {
    copy_if_distinct(recv, send, bytes);
    return;
  }
  if (algorithm == Algorithm::kDirect)
    return collectives::shm_direct_reduce_scatter(*shm_, send, recv, recv_count, dtype, op);
  collectives::ring_reduce_scatter(*context_, send, recv, recv_count, dtype, op);
}

void Communicator::allgather(const void* send, void* recv, size_t count, DType dtype,
                             const CollectiveOptions& options) {
  allgatherv(send, count, recv, std::vector<size_t>(static_cast<size_t>(size_), count), dtype,
             options);
}

void Communicator::allgatherv(const void* send, size_t send_count, void* recv,
                              const std::vector<size_t>& recv_counts, DType dtype,
                              const CollectiveOptions& options) {
  KOLO_CHECK_EQ(recv_counts.size(), static_cast<size_t>(size_), ErrorCode::kInvalidArgument,
                "allgatherv: recv_counts must have one entry per rank");
  KOLO_CHECK_EQ(send_count, recv_counts[static_cast<size_t>(rank_)], ErrorCode::kInvalidArgument,
                "allgatherv: send_count and recv_counts[rank]");
  const size_t esize = dtype_size(dtype);
  const size_t total = std::accumulate(recv_counts.begin(), recv_counts.end(), size_t{0});
  check_buffer(send, send_count, "allgatherv", "send");
  check_buffer(recv, total, "allgatherv", "receive");
  Algorithm algorithm = begin("allgather", total * esize, options);
  if (algorithm == Algorithm::kDirect && size_ > 1 && total > 0)
    return collectives::shm_direct_allgatherv(*shm_, send, recv, recv_counts, dtype);
  size_t own = std::accumulate(recv_counts.begin(), recv_counts.begin() + rank_, size_t{0});
  copy_if_distinct(static_cast<char*>(recv) + own * esize, send, send_count * esize);
  if (size_ == 1 || total == 0) return;
  collectives::ring_allgatherv(*context_, recv, recv_counts, dtype);
}

void Communicator::broadcast(void* data, size_t count, DType dtype, int root,
                             const CollectiveOptions& options) {
  KOLO_CHECK_ARG(root >= 0 && root < size_, "broadcast: root ", root, " is not in [0, ", size_,
                 ")");
  check_buffer(data, count, "broadcast", "data");
  const size_t bytes = count * dtype_size(dtype);
  Algorithm algorithm = begin("broadcast", bytes, options);
  if (size_ == 1 || bytes == 0) return;
  if (algorithm == Algorithm::kDirect)
    return collectives::shm_direct_broadcast(*shm_, data, bytes, root);
  collectives::chain_broadcast(*context_, data, bytes, root);
}

void Communicator::alltoall(const void* send, void* recv, size_t count, DType dtype,
                            const CollectiveOptions& options) {
  std::vector<size_t> counts(static_cast<size_t>(size_), count);
  alltoallv(send, counts, recv, counts, dtype, options);
}

void Communicator::alltoallv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                             const std::vector<size_t>& recv_counts, DType dtype,
                             const CollectiveOptions& options) {
  KOLO_CHECK_EQ(send_counts.size(), static_cast<size_t>(size_), ErrorCode::kInvalidArgument,
                "alltoallv: send_counts must have one entry per rank");
  KOLO_CHECK_EQ(recv_counts.size(), static_cast<size_t>(size_), ErrorCode::kInvalidArgument,
                "alltoallv: recv_counts must have one entry per rank");
  const size_t esize = dtype_size(dtype);
  std::vector<size_t> send_bytes, recv_bytes;
  for (size_t c : send_counts) send_bytes.push_back(c * esize);
  for (size_t c : recv_counts) recv_bytes.push_back(c * esize);
  const size_t send_total = std::accumulate(send_bytes.begin(), send_bytes.end(), size_t{0});
  const size_t recv_total = std::accumulate(recv_bytes.begin(), recv_bytes.end(), size_t{0});
  check_buffer(send, send_total, "alltoallv", "send");
  check_buffer(recv, recv_total, "alltoallv", "receive");
  const Algorithm algorithm = begin("alltoall", send_total, options);
  // In place, blocks would be overwritten before they are sent: send from a copy.
  std::vector<char> copy;
  const char* source = static_cast<const char*>(send);
  if (send == recv && size_ > 1) {
    copy.assign(source, source + send_total);
    source = copy.data();
  }
  auto send_offsets = prefix_offsets(send_bytes), recv_offsets = prefix_offsets(recv_bytes);
  if (size_ == 1) {
    copy_if_distinct(recv, source, send_bytes[0]);
    return;
  }
  if (algorithm == Algorithm::kDirect)
    return collectives::shm_direct_alltoallv(*shm_, source, send_bytes, send_offsets,
                                             static_cast<char*>(recv), recv_bytes, recv_offsets);
  collectives::pairwise_alltoallv(*context_, source, send_bytes, send_offsets,
                                  static_cast<char*>(recv), recv_bytes, recv_offsets);
}

void Communicator::barrier(const CollectiveOptions& options) {
  begin("barrier", 0, options);
  if (size_ > 1) collectives::dissemination_barrier(*context_);
}

}  // namespace kolo
