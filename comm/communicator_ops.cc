// Communicator collectives: argument checks, the single-rank shortcut, in-place handling and
// dispatch to the algorithms in comm/collectives/.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "comm/base/env.h"
#include "comm/base/error.h"
#include "comm/base/log.h"
#include "comm/collectives/collectives.h"
#include "comm/collectives/cost_model.h"
#include "comm/communicator.h"
#include "comm/reduce/reduce.h"
#include "comm/transport/context.h"
#include "comm/transport/shared_memory.h"

namespace kolo {
namespace {

// The most bytes one buffer may hold: every byte count derived from element counts (times the
// world size, padded) then fits a size_t.
constexpr size_t kMaxBytes = size_t{1} << 60;

void check_dtype(DType dtype, const char* collective) {
  KOLO_CHECK_ARG(static_cast<int>(dtype) < kNumDTypes, collective, ": dtype ",
                 static_cast<int>(dtype), " is not a kolo dtype (0-", kNumDTypes - 1, ")");
}

// A buffer of `count` elements: a known dtype, no byte-size overflow, not null unless empty.
void check_buffer(const void* ptr, size_t count, DType dtype, const char* collective,
                  const char* which) {
  check_dtype(dtype, collective);
  KOLO_CHECK_ARG(count <= kMaxBytes / dtype_size(dtype), collective, ": ", which, " count ", count,
                 " is too large (", dtype_name(dtype), " elements of at most 2^60 bytes)");
  KOLO_CHECK_ARG(ptr != nullptr || count == 0, collective, ": ", which,
                 " buffer is null but count is ", count);
}

}  // namespace

// The send and receive buffers share no byte, or are in the call's one in-place form: `inner`
// starts `offset` bytes into `outer`. Any other overlap is refused before anything is sent:
// it would be read after being written, with results that differed by algorithm and size
// (and an error from the reduction on some paths only, after the call had begun).
void check_overlap(const void* outer, size_t outer_bytes, const void* inner, size_t inner_bytes,
                   size_t offset, const char* collective, const char* in_place_form) {
  const auto o = reinterpret_cast<uintptr_t>(outer), i = reinterpret_cast<uintptr_t>(inner);
  if (outer_bytes == 0 || inner_bytes == 0 || o + outer_bytes <= i || i + inner_bytes <= o) return;
  KOLO_CHECK_ARG(i == o + offset, collective,
                 ": the send and receive buffers overlap, but not in place (", in_place_form,
                 "); use disjoint buffers or the in-place form");
}

namespace {

// The sum of per-rank counts, refused before it can wrap.
size_t checked_total(const std::vector<size_t>& counts, DType dtype, const char* collective) {
  check_dtype(dtype, collective);
  const size_t limit = kMaxBytes / dtype_size(dtype);
  size_t total = 0;
  for (size_t c : counts) {
    KOLO_CHECK_ARG(c <= limit && total <= limit - c, collective, ": counts add up to more than ",
                   limit, " ", dtype_name(dtype), " elements");
    total += c;
  }
  return total;
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

// Whether `algorithm` can run `collective` of `bytes` on a transport with these capabilities.
bool fits(Collective collective, Algorithm algorithm, const collectives::TransportTraits& t,
          size_t bytes) {
  const bool allreduce = collective == Collective::kAllreduce;
  switch (algorithm) {
    case Algorithm::kAuto:
    case Algorithm::kRing: return true;
    case Algorithm::kTree:
    case Algorithm::kHalvingDoubling: return allreduce;
    case Algorithm::kLowLatency:
      return allreduce && t.small_slot_bytes > 0 && bytes <= t.small_slot_bytes;
    case Algorithm::kDirect: return t.direct && collective != Collective::kBarrier;
    case Algorithm::kHierarchical:
      return t.hosts > 1 && t.most_per_host > 1 &&
             (allreduce || (t.host_blocks && (collective == Collective::kReduceScatter ||
                                              collective == Collective::kAllgather)));
  }
  return false;
}

collectives::TransportTraits traits_of(TransportKind kind, transport::SharedMemory* shared,
                                       const std::vector<int>& host_of_rank) {
  collectives::TransportTraits t{kind, 0, false};
  if (shared != nullptr) {
    t.small_slot_bytes = shared->small_slot_bytes();
    t.direct = shared->direct_enabled();
  }
  std::vector<int> per_host;
  for (int h : host_of_rank) {
    if (h >= static_cast<int>(per_host.size())) per_host.resize(static_cast<size_t>(h) + 1, 0);
    ++per_host[static_cast<size_t>(h)];
  }
  t.hosts = std::max<int>(1, static_cast<int>(per_host.size()));
  for (int count : per_host) t.most_per_host = std::max(t.most_per_host, count);
  t.host_blocks = host_of_rank.size() == static_cast<size_t>(t.hosts * t.most_per_host);
  for (size_t r = 0; r < host_of_rank.size() && t.host_blocks; ++r)
    t.host_blocks = host_of_rank[r] == static_cast<int>(r) / t.most_per_host;
  return t;
}

}  // namespace

Algorithm Communicator::choose_algorithm(Collective collective, size_t bytes,
                                         const CollectiveOptions& options) const {
  const auto traits = traits_of(transport_, shared_, host_of_rank_);
  Algorithm algorithm = options.algorithm;
  // KOLO_ALGORITHM is a preference: it applies where it fits, kolo chooses elsewhere.
  if (algorithm == Algorithm::kAuto && fits(collective, env_algorithm_, traits, bytes))
    algorithm = env_algorithm_;
  if (!fits(collective, algorithm, traits, bytes)) {
    std::string accepted = "auto, ring";
    for (Algorithm a : {Algorithm::kTree, Algorithm::kHalvingDoubling, Algorithm::kLowLatency,
                        Algorithm::kDirect, Algorithm::kHierarchical})
      if (fits(collective, a, traits, bytes)) accepted += std::string(", ") + algorithm_name(a);
    // The hierarchical reduce_scatter and allgather need each host's ranks in one block (rank
    // r on host r / ranks-per-host): with ranks interleaved the transport was blamed.
    auto blocked = traits;
    blocked.host_blocks = true;
    const bool layout = !traits.host_blocks && fits(collective, algorithm, blocked, bytes);
    KOLO_THROW(ErrorCode::kInvalidArgument, collective_name(collective), " of ", bytes,
               " B: algorithm '", algorithm_name(algorithm), "' is not available ",
               layout ? "here: its ranks are not in one block per host (rank r on host r / "
                        "ranks per host, each host with as many)"
                      : std::string("with the ") + transport_name(transport_) + " transport",
               "; accepted: ", accepted);
  }
  if (algorithm != Algorithm::kAuto) return algorithm;
  if (collective == Collective::kAllreduce)
    return collectives::choose_allreduce(traits, bytes, size_);
  // Across hosts the hierarchical reduce-scatter and allgather send fewer bytes over every
  // host's link ((H-1)/H S against (n-1)/n S) and fewer messages ((H-1) against (n-1)).
  if (fits(collective, Algorithm::kHierarchical, traits, bytes)) return Algorithm::kHierarchical;
  return fits(collective, Algorithm::kDirect, traits, bytes) ? Algorithm::kDirect
                                                             : Algorithm::kRing;
}

Algorithm Communicator::begin(Collective collective, size_t bytes, const CollectiveOptions& options,
                              std::optional<DType> dtype, std::optional<ReduceOp> op, int root,
                              bool sizes_agree) {
  Algorithm algorithm = choose_algorithm(collective, bytes, options);
  if (context_) {
    transport::CallSignature call;
    call.bytes = sizes_agree ? bytes : 0;
    call.kind = transport::call_kind(
        static_cast<uint8_t>(collective), dtype ? static_cast<uint8_t>(*dtype) : 0xff,
        op ? static_cast<uint8_t>(*op) : 0xff, static_cast<uint8_t>(options.algorithm));
    call.root = root;
    context_->begin_call(collective_name(collective), bytes, call);
  }
  if (algorithm != last_algorithm_ && log::threshold() <= log::Level::kDebug) {
    KOLO_LOG(kDebug, collective_name(collective), " of ", bytes, " B on ", size_, " ranks over ",
             transport_name(transport_), ": algorithm ", algorithm_name(algorithm));
  }
  last_algorithm_ = algorithm;
  return algorithm;
}

bool Communicator::done_if_empty(size_t bytes) {
  if (bytes > 0) return false;
  if (size_ > 1) collectives::dissemination_barrier(*context_);
  return true;
}

void Communicator::allreduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                             const CollectiveOptions& options) {
  check_op_and_dtype(op, dtype, "allreduce");
  check_buffer(send, count, dtype, "allreduce", "send");
  check_buffer(recv, count, dtype, "allreduce", "receive");
  const size_t bytes = count * dtype_size(dtype);
  check_overlap(recv, bytes, send, bytes, 0, "allreduce", "send == recv");
  Algorithm algorithm = begin(Collective::kAllreduce, bytes, options, dtype, op);
  if (size_ == 1 || done_if_empty(bytes)) {
    copy_if_distinct(recv, send, bytes);
    return;
  }
  switch (algorithm) {
    case Algorithm::kHierarchical: return hierarchical_allreduce(send, recv, count, dtype, op);
    case Algorithm::kLowLatency:
      return collectives::shm_low_latency_allreduce(*shared_, send, recv, count, dtype, op);
    case Algorithm::kDirect:
      return collectives::shm_direct_allreduce(*shared_, send, recv, count, dtype, op);
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
  check_op_and_dtype(op, dtype, "reduce_scatter");
  check_buffer(recv, recv_count, dtype, "reduce_scatter", "receive");
  check_buffer(send,
               checked_total(std::vector<size_t>(static_cast<size_t>(size_), recv_count), dtype,
                             "reduce_scatter"),
               dtype, "reduce_scatter", "send");
  const size_t bytes = recv_count * dtype_size(dtype);
  check_overlap(send, bytes * static_cast<size_t>(size_), recv, bytes,
                bytes * static_cast<size_t>(rank_), "reduce_scatter",
                "recv == send + rank * recv_count");
  Algorithm algorithm =
      begin(Collective::kReduceScatter, bytes * static_cast<size_t>(size_), options, dtype, op);
  if (size_ == 1 || done_if_empty(bytes)) {
    copy_if_distinct(recv, send, bytes);
    return;
  }
  if (algorithm == Algorithm::kDirect)
    return collectives::shm_direct_reduce_scatter(*shared_, send, recv, recv_count, dtype, op);
  if (algorithm == Algorithm::kHierarchical)
    return hierarchical_reduce_scatter(send, recv, recv_count, dtype, op);
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
  KOLO_CHECK_ARG(recv_counts.size() == static_cast<size_t>(size_),
                 "allgatherv: ", recv_counts.size(), " recv_counts for ", size_,
                 " ranks; pass one per rank");
  KOLO_CHECK_ARG(send_count == recv_counts[static_cast<size_t>(rank_)], "allgatherv on rank ",
                 rank_, ": send_count ", send_count, " differs from recv_counts[", rank_, "] ",
                 recv_counts[static_cast<size_t>(rank_)]);
  const size_t total = checked_total(recv_counts, dtype, "allgatherv");
  const size_t esize = dtype_size(dtype);
  check_buffer(send, send_count, dtype, "allgatherv", "send");
  check_buffer(recv, total, dtype, "allgatherv", "receive");
  size_t own = std::accumulate(recv_counts.begin(), recv_counts.begin() + rank_, size_t{0});
  check_overlap(recv, total * esize, send, send_count * esize, own * esize, "allgather",
                "send == recv + this rank's offset");
  Algorithm algorithm = begin(Collective::kAllgather, total * esize, options, dtype);
  if (algorithm == Algorithm::kDirect && size_ > 1 && total > 0)
    return collectives::shm_direct_allgatherv(*shared_, send, recv, recv_counts, dtype);
  // The hierarchical allgather takes equal counts; allgatherv with others goes round the ring.
  const bool equal = std::all_of(recv_counts.begin(), recv_counts.end(),
                                 [&](size_t c) { return c == send_count; });
  if (algorithm == Algorithm::kHierarchical && equal && total > 0)
    return hierarchical_allgather(send, recv, send_count, dtype);
  copy_if_distinct(static_cast<char*>(recv) + own * esize, send, send_count * esize);
  if (size_ == 1 || done_if_empty(total)) return;
  collectives::ring_allgatherv(*context_, recv, recv_counts, dtype);
}

void Communicator::broadcast(void* data, size_t count, DType dtype, int root,
                             const CollectiveOptions& options) {
  KOLO_CHECK_ARG(root >= 0 && root < size_, "broadcast: root ", root, " is not in [0, ", size_,
                 ")");
  check_buffer(data, count, dtype, "broadcast", "data");
  const size_t bytes = count * dtype_size(dtype);
  Algorithm algorithm = begin(Collective::kBroadcast, bytes, options, dtype, std::nullopt, root);
  if (size_ == 1 || done_if_empty(bytes)) return;
  if (algorithm == Algorithm::kDirect)
    return collectives::shm_direct_broadcast(*shared_, data, bytes, root);
  collectives::chain_broadcast(*context_, data, bytes, root);
}

void Communicator::alltoall(const void* send, void* recv, size_t count, DType dtype,
                            const CollectiveOptions& options) {
  std::vector<size_t> counts(static_cast<size_t>(size_), count);
  alltoallv_as("alltoall", send, counts, recv, counts, dtype, options);
}

void Communicator::alltoallv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                             const std::vector<size_t>& recv_counts, DType dtype,
                             const CollectiveOptions& options) {
  alltoallv_as("alltoallv", send, send_counts, recv, recv_counts, dtype, options);
}

void Communicator::alltoallv_as(const char* name, const void* send,
                                const std::vector<size_t>& send_counts, void* recv,
                                const std::vector<size_t>& recv_counts, DType dtype,
                                const CollectiveOptions& options) {
  KOLO_CHECK_ARG(send_counts.size() == static_cast<size_t>(size_), name, ": ", send_counts.size(),
                 " send_counts for ", size_, " ranks; pass one per rank");
  KOLO_CHECK_ARG(recv_counts.size() == static_cast<size_t>(size_), name, ": ", recv_counts.size(),
                 " recv_counts for ", size_, " ranks; pass one per rank");
  checked_total(send_counts, dtype, name);
  checked_total(recv_counts, dtype, name);
  const size_t esize = dtype_size(dtype);
  std::vector<size_t> send_bytes, recv_bytes;
  for (size_t c : send_counts) send_bytes.push_back(c * esize);
  for (size_t c : recv_counts) recv_bytes.push_back(c * esize);
  const size_t send_total = std::accumulate(send_bytes.begin(), send_bytes.end(), size_t{0});
  const size_t recv_total = std::accumulate(recv_bytes.begin(), recv_bytes.end(), size_t{0});
  check_buffer(send, send_total / esize, dtype, name, "send");
  check_buffer(recv, recv_total / esize, dtype, name, "receive");
  check_overlap(recv, recv_total, send, send_total, 0, name, "send == recv");
  const Algorithm algorithm =
      begin(Collective::kAlltoall, send_total, options, dtype, std::nullopt, -1,
            /*sizes_agree=*/false);
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
    return collectives::shm_direct_alltoallv(*shared_, source, send_bytes, send_offsets,
                                             static_cast<char*>(recv), recv_bytes, recv_offsets);
  collectives::pairwise_alltoallv(*context_, source, send_bytes, send_offsets,
                                  static_cast<char*>(recv), recv_bytes, recv_offsets);
}

void Communicator::set_busy_polling(bool allowed) {
  if (context_) context_->set_busy_polling(allowed);
}

void Communicator::barrier(const CollectiveOptions& options) {
  begin(Collective::kBarrier, 0, options);
  if (size_ > 1) collectives::dissemination_barrier(*context_);
}

}  // namespace kolo
