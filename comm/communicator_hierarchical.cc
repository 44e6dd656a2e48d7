// Algorithm::kHierarchical, the collectives of a communicator whose ranks are on several hosts.
// Allreduce:
//   1. within each host, over shared memory, a reduce-scatter leaves local rank i with shard i
//      of the host's sum (k shards, k = the fewest ranks any host has; a host with more ranks
//      allreduces instead, and its ranks from k on hold no shard);
//   2. local rank i < k allreduces shard i with local rank i of every other host, all shards
//      at once, each over its own connections: a host sends 2(H-1)/H of the data over its link
//      where a flat ring sends 2(n-1)/n;
//   3. within each host, an allgather of the shards.
// When the count splits into k equal shards and every host has k ranks, the data goes from send
// through this rank's shard (in a scratch buffer from alloc_shared) to recv; otherwise through
// a scratch buffer of k zero-padded shards. Averages sum and divide once.
// Reduce-scatter and allgather, when every host has k ranks numbered consecutively (host j holds
// ranks jk .. jk + k - 1, so rank jk + i's block is reached by local rank i's shard
// communicator at its rank j): a reduce-scatter is H local reduce-scatters (host j's k blocks,
// local rank i keeping the host's sum of block jk + i) and then one reduce-scatter of those H
// pieces among local rank i's peers; an allgather is the shard communicator's allgather and
// then H local allgathers, each writing one host's k blocks. A host's link carries (H-1)/H of
// the data instead of the flat ring's (n-1)/n.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "comm/base/error.h"
#include "comm/communicator.h"
#include "comm/reduce/reduce.h"
#include "comm/transport/context.h"

namespace kolo {
namespace {

// Data per pipeline chunk: large allreduces go chunk by chunk, so that the shared-memory phases
// of neighbouring chunks run while a chunk crosses the hosts' links.
constexpr size_t kChunkBytes = size_t{4} << 20;

// Runs one job at a time on its own thread: the cross-host allreduce of a chunk.
class Worker {
 public:
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void start(std::function<void()> job) {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = std::move(job);
    busy_ = true;
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    changed_.notify_all();
  }

  // Waits for the job (whose own waits have the communicator's deadline); rethrows its error.
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !busy_; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      changed_.wait(lock, [&] { return stopping_ || job_; });
      if (stopping_) return;
      auto job = std::exchange(job_, nullptr);
      lock.unlock();
      std::exception_ptr error;
      try {
        job();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      error_ = error;
      busy_ = false;
      changed_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::function<void()> job_;
  bool busy_ = false, stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace

struct Communicator::Hierarchy {
  std::shared_ptr<Communicator> local;  // this host's ranks, over shared memory
  std::shared_ptr<Communicator> shard;  // local rank i on every host (i < shards), else null
  int shards = 1;
  bool even = true;  // every host has `shards` ranks

  struct FreeShared {
    void operator()(char* p) const { free_shared(p); }
  };
  std::unique_ptr<char, FreeShared> scratch;
  size_t scratch_bytes = 0;
  Worker crossing;  // declared last: stopped first

  char* reserve(size_t bytes) {
    if (bytes > scratch_bytes) {
      scratch.reset();
      scratch.reset(static_cast<char*>(alloc_shared(bytes)));
      scratch_bytes = bytes;
    }
    return scratch.get();
  }
};

Communicator::Communicator() = default;
Communicator::~Communicator() = default;

Communicator::Hierarchy& Communicator::hierarchy() {
  if (!hierarchy_) {  // every rank gets here in the same call: the splits are collective
    auto h = std::make_unique<Hierarchy>();
    std::vector<int> per_host(static_cast<size_t>(cross_size_), 0);
    for (int host : host_of_rank_) ++per_host[static_cast<size_t>(host)];
    h->shards = *std::min_element(per_host.begin(), per_host.end());
    h->even = h->shards == *std::max_element(per_host.begin(), per_host.end());
    CommunicatorOptions local_options = options_;
    local_options.transport = TransportKind::kShm;
    h->local = split_with(cross_rank_, rank_, local_options);
    h->shard = split_with(local_rank_ < h->shards ? local_rank_ : kUndefinedColor, rank_, options_);
    KOLO_ASSERT(h->local->rank() == local_rank_ && h->local->size() == local_size_);
    hierarchy_ = std::move(h);
  }
  return *hierarchy_;
}

// A failure in one of the sub-communicators (a lost host seen by the shard communicator) is
// also made the failure of the other, so that this host's other ranks, waiting for this one in
// their local collective, report the root cause (the rank and host really lost) instead of
// "lost rank 0" on their own host.
void Communicator::hierarchical(const std::function<void(Hierarchy&)>& steps) {
  try {
    steps(hierarchy());
  } catch (const Error& e) {
    if (hierarchy_) {  // the worker has stopped: the steps wait for it before they unwind
      for (Communicator* c : {hierarchy_->local.get(), hierarchy_->shard.get()})
        if (c != nullptr && c->context_ && !c->context_->failed()) c->context_->fail(e.what());
    }
    throw;
  }
}

void Communicator::hierarchical_reduce_scatter(const void* send, void* recv, size_t count,
                                               DType dtype, ReduceOp op) {
  hierarchical([&](Hierarchy& h) {
    const size_t esize = dtype_size(dtype), k = static_cast<size_t>(local_size_);
    const ReduceOp sum = op == ReduceOp::kAverage ? ReduceOp::kSum : op;
    char* pieces = h.reserve(static_cast<size_t>(cross_size_) * count * esize);
    for (size_t j = 0; j < static_cast<size_t>(cross_size_); ++j)
      h.local->reduce_scatter(static_cast<const char*>(send) + j * k * count * esize,
                              pieces + j * count * esize, count, dtype, sum);
    h.shard->reduce_scatter(pieces, recv, count, dtype, sum);
    if (op == ReduceOp::kAverage) reduce::finish_average(recv, count, dtype, size_);
  });
}

void Communicator::hierarchical_allgather(const void* send, void* recv, size_t count, DType dtype) {
  hierarchical([&](Hierarchy& h) {
    const size_t esize = dtype_size(dtype), k = static_cast<size_t>(local_size_);
    char* pieces = h.reserve(static_cast<size_t>(cross_size_) * count * esize);
    h.shard->allgather(send, pieces, count, dtype);  // before recv is written: send may lie in it
    for (size_t j = 0; j < static_cast<size_t>(cross_size_); ++j)
      h.local->allgather(pieces + j * count * esize,
                         static_cast<char*>(recv) + j * k * count * esize, count, dtype);
  });
}

void Communicator::hierarchical_allreduce(const void* send, void* recv, size_t count, DType dtype,
                                          ReduceOp op) {
  hierarchical(
      [&](Hierarchy& h) { hierarchical_allreduce_steps(h, send, recv, count, dtype, op); });
}

void Communicator::hierarchical_allreduce_steps(Hierarchy& h, const void* send, void* recv,
                                                size_t count, DType dtype, ReduceOp op) {
  Communicator& local = *h.local;
  const size_t esize = dtype_size(dtype), shards = static_cast<size_t>(h.shards);
  const size_t block = (count + shards - 1) / shards;
  const ReduceOp sum = op == ReduceOp::kAverage ? ReduceOp::kSum : op;
  const bool holder = local_rank_ < h.shards;
  auto across = [&](char* shard) {
    if (!holder) return;
    h.shard->allreduce(shard, shard, block, dtype, sum);
    if (op == ReduceOp::kAverage) reduce::finish_average(shard, block, dtype, size_);
  };
  if (count % shards == 0 && h.even) {  // the same choice on every host
    // The common case: straight from send and into recv, only the shards in scratch. Chunk c
    // is reduce-scattered while chunk c - 1 crosses the link, and gathered while c + 1 does.
    const char* in = static_cast<const char*>(send);
    char* out = static_cast<char*>(recv);
    const size_t chunk = std::max(shards, kChunkBytes / esize / shards * shards);
    const size_t chunks = (count + chunk - 1) / chunk;
    char* slots = h.reserve(2 * chunk / shards * esize);
    auto slot = [&](size_t c) { return slots + (c % 2) * (chunk / shards) * esize; };
    auto shard_count = [&](size_t c) { return (std::min(chunk, count - c * chunk)) / shards; };
    auto across_chunk = [&](size_t c) {
      if (!holder) return;
      char* shard = slot(c);
      const size_t n = shard_count(c);
      h.crossing.start([&h, shard, n, dtype, sum, op, this] {
        h.shard->allreduce(shard, shard, n, dtype, sum);
        if (op == ReduceOp::kAverage) reduce::finish_average(shard, n, dtype, size_);
      });
    };
    auto gather_chunk = [&](size_t c) {
      if (holder) h.crossing.wait();
      local.allgather(slot(c), out + c * chunk * esize, shard_count(c), dtype);
    };
    struct WaitOnExit {  // the worker must not outlive this call's buffers
      Worker& w;
      ~WaitOnExit() {
        try {
          w.wait();
        } catch (...) {
        }
      }
    } guard{h.crossing};
    for (size_t c = 0; c < chunks; ++c) {
      local.reduce_scatter(in + c * chunk * esize, slot(c), shard_count(c), dtype, sum);
      if (c > 0) gather_chunk(c - 1);  // waits for chunk c - 1's crossing first
      across_chunk(c);
    }
    gather_chunk(chunks - 1);
    return;
  }
  char* buf = h.reserve(block * shards * esize);
  std::memcpy(buf, send, count * esize);
  std::memset(buf + count * esize, 0, (block * shards - count) * esize);
  char* mine = holder ? buf + static_cast<size_t>(local_rank_) * block * esize : buf;
  if (h.even)
    local.reduce_scatter(buf, mine, block, dtype, sum);
  else
    local.allreduce(buf, buf, block * shards, dtype, sum);
  across(mine);
  std::vector<size_t> counts(static_cast<size_t>(local_size_), 0);
  std::fill(counts.begin(), counts.begin() + h.shards, block);
  local.allgatherv(mine, holder ? block : 0, buf, counts, dtype);
  std::memcpy(recv, buf, count * esize);
}

}  // namespace kolo
