// Collectives that use shared memory directly instead of messages (shm transport only).
//
// low_latency (small allreduce): every rank copies its input into its small slot in shared
// memory and arrives at a new generation; once all have arrived, every rank reduces all slots
// in rank order, so every rank computes the same bits. Slots alternate by generation, so no
// closing barrier is needed: a rank can only reuse a slot two generations later, after every
// peer has arrived at the generation in between, i.e. finished reading.
//
// direct (larger messages): ranks publish their buffer addresses and meet at a barrier. When
// every published buffer can be read with plain loads (alloc_shared buffers mapped by peers,
// or ranks that are threads of one process), rank r reads block r of every peer's input
// straight from the peer's memory in cache-sized chunks, combines it into its own output and
// writes each reduced chunk into every peer's output while it is in cache. A last barrier
// marks every output complete and keeps every buffer alive until nobody touches it.
//
// Otherwise (ordinary buffers in several processes) the direct collectives are staged: reading
// another process's private memory needs the kernel (process_vm_readv), which pins every page
// and ran at 0.4-0.7x of memcpy's speed on the machines measured (alltoall, which copies every
// byte once anyway, reads its large blocks that way). The data streams through each rank's two
// staging slots instead: in each round a rank copies the next pieces of its data into its slot
// for the round's generation and arrives; once all have arrived every rank takes the pieces
// meant for it (combining them, for the reduce-scatter half of an allreduce) while they are
// still in cache. Slots alternate by generation as the small slots do. Every rank sees the
// same answer to "plain loads?" in the segment headers, so all take the same path. At 2 ranks
// with a core each, the allreduce runs its two halves in the same rounds (staged_allreduce).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <mutex>
#include <vector>

#include "comm/base/copy.h"
#include "comm/base/log.h"
#include "comm/collectives/collectives.h"
#include "comm/reduce/reduce.h"
#include "comm/transport/shared_memory.h"

namespace kolo::collectives {
namespace {

constexpr size_t kChunkBytes = 128 * 1024;  // fits L2 with room for the combine's operands
// Out of place, from this message size on, reduced blocks go to peers' outputs with streaming
// stores (no read-for-ownership of lines nobody else touches). From 1 MiB before; np=2, two
// interleaved runs, 2-8 MiB took 180-189, 354-370, 753-757 us with plain stores against
// 188-958, 364-386, 756-774 us, and 16 MiB up measured alike.
//
// In place (the engine's fusion buffers, a framework's gradients) nothing is streamed: a
// peer's output is its input, which its owner is reading at the same time, and streaming
// stores to lines cached elsewhere evict them. `allreduce_bw --inplace 1 --alloc shared`, np=2:
// 46 us at 1 MiB, 942 us at 16 MiB, 27.5 ms at 256 MiB, against 123 us, 1.90 ms and 53.9 ms
// with the out-of-place choices (107-201% of the copy bound against 46-73%).
constexpr size_t kStreamingBytes = 16 << 20;
// Out of place, from this message size on, the rank's own output is written with streaming
// stores too, from a chunk reduced in cache: plain stores first read each output line (read for
// ownership), S/2 more bytes read per rank at np=2. Below it the outputs still fit the caches
// and plain stores win. np=2, three interleaved runs each: 256 MiB 6.2-7.3 GB/s against
// 4.9-6.4, 64 MiB 6.7-7.2 against 5.7-6.2, 32 MiB 6.7-8.9 against 4.0-6.2; 4 MiB 9.6-10.3
// against 10.9-11.5.
constexpr size_t kOwnStreamingBytes = 32 << 20;
// alltoall from ordinary buffers: below this block size ranks stage their blocks; from it on
// they may read them from the peers' send buffers through the kernel instead. On an Intel Xeon
// VM, fp32, `--compare mpi`, two runs each, us (kernel / staged): np=4 512 KiB 131-134 /
// 366-377, np=2 32 MiB 4755-5717 / 7456-7579, np=8 4 MiB 1952-2163 / 2845-3939; np=2 64 KiB
// (32 KiB blocks) 5.6-6.1 / 7.5-7.6; with 8 KiB blocks (np=8, 64 KiB) staging was faster:
// 63-79 / 88-120.
constexpr size_t kKernelReadBlockBytes = 32 * 1024;
// From here on the kernel reads were as fast or faster on every machine measured. Between the
// two sizes the faster way depends on the machine: on an AMD EPYC VM, where process_vm_readv
// costs more per call, np=2 64 KiB took 8.3-11.5 us through the kernel against 3.8-5.6 staged,
// 256 KiB 11.2-12.8 against 10.7-10.9. So there the alltoall measures both (PathTrials).
constexpr size_t kKernelReadAlwaysBytes = 1 << 20;

char* chunk_buffer() {
  alignas(64) static thread_local char buffer[kChunkBytes];
  return buffer;
}

// Where a chunk is reduced before streaming stores write it to every output, this rank's too.
char* reduced_chunk() {
  alignas(64) static thread_local char buffer[kChunkBytes];
  return buffer;
}

// dst = a op x_q, where x_q is rank q's contribution in a combine in rank order over n ranks:
// the last one (q = n - 1) of an average also divides, in the same pass
// (reduce::combine_average).
void combine_step(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op,
                  int q, int n) {
  if (op == ReduceOp::kAverage && q == n - 1)
    reduce::combine_average(dst, a, b, count, dtype, n);
  else
    reduce::combine(dst, a, b, count, dtype, op);
}

// dst[0..count) = x_0 op x_1 op ... op x_{n-1}, combined in rank order whichever rank computes
// it, so an element's result does not depend on which block (owner) it falls in: a tensor gives
// the same bits wherever a fusion buffer places it; an average is divided by n in the last
// combine's pass (reduce::combine_average). `own` is this rank's x (it may be dst); source(q)
// returns rank q's bytes, valid until the next call. x_0 op x_1 goes straight into dst (combine
// reads each element before writing it), so only ranks from 2 on, whose own x is needed after
// dst was first written, keep a copy of it when reducing in place.
template <class Source>
void combine_in_rank_order(char* dst, const char* own, int rank, int n, size_t count, DType dtype,
                           ReduceOp op, Source&& source) {
  const size_t bytes = count * dtype_size(dtype);
  if (n == 1) {  // an average by 1 is the value itself
    if (dst != own) std::memcpy(dst, own, bytes);
    return;
  }
  const char* mine = own;
  if (rank >= 2 && dst == own) {
    static thread_local std::vector<char> stash;
    stash.assign(own, own + bytes);
    mine = stash.data();
  }
  // Combine with x_q, the last one (q = n - 1) finishing an average.
  auto step = [&](const char* a, const char* b, int q) {
    combine_step(dst, a, b, count, dtype, op, q, n);
  };
  if (rank == 0) {
    step(mine, source(1), 1);
  } else if (rank == 1) {
    step(source(0), mine, 1);
  } else {
    std::memcpy(dst, source(0), bytes);
    step(dst, source(1), 1);
  }
  for (int q = 2; q < n; ++q) step(dst, q == rank ? mine : source(q), q);
}

// dst[0..bytes) = input[0..bytes) op (the same range of every peer's published buffer
// `index`, at byte offset `offset`), in rank order (combine_in_rank_order, which also
// averages for kAverage). With push_index >= 0 each
// reduced chunk is also written to the same range of every peer's published buffer
// `push_index` (the allreduce's outputs) while it is in cache, with streaming stores if asked
// (and to dst too if `stream_own`).
void reduce_from_peers(transport::SharedMemory& ctx, int index, size_t offset, const char* input,
                       char* dst, size_t bytes, DType dtype, ReduceOp op, int push_index = -1,
                       bool streaming = false, bool stream_own = false) {
  const int n = ctx.size();
  const size_t esize = dtype_size(dtype);
  const size_t chunk = kChunkBytes / esize * esize;
  for (size_t at = 0; at < bytes; at += chunk) {
    const size_t len = std::min(chunk, bytes - at);
    char* out = stream_own ? reduced_chunk() : dst + at;
    combine_in_rank_order(out, input + at, ctx.rank(), n, len / esize, dtype, op,
                          [&](int peer) -> const char* {
                            const char* remote = ctx.peer_address(peer, index) + offset + at;
                            if (const char* view = ctx.peer_view(peer, remote, len)) return view;
                            ctx.read_peer(peer, remote, chunk_buffer(), len);
                            return chunk_buffer();
                          });
    if (stream_own) copy_streaming(dst + at, out, len);
    if (push_index < 0) continue;
    for (int step = 1; step < n; ++step) {
      const int peer = (ctx.rank() + step) % n;
      ctx.write_peer(peer, const_cast<char*>(ctx.peer_address(peer, push_index)) + offset + at, out,
                     len, streaming);
    }
  }
}

// Round by round through the staging slots: every rank contributes `bytes[rank]` from `src`
// and receives every rank's block p at dst[p] (its own too, unless dst[rank] is src).
void staged_exchange(transport::SharedMemory& ctx, const char* src,
                     const std::vector<size_t>& bytes, const std::vector<char*>& dst) {
  const size_t slot_bytes = ctx.stage_slot_bytes();
  const int n = ctx.size(), r = ctx.rank();
  auto piece = [&](int p, size_t at) {
    const size_t total = bytes[static_cast<size_t>(p)];
    return at < total ? std::min(slot_bytes, total - at) : size_t{0};
  };
  const size_t rounds_bytes = *std::max_element(bytes.begin(), bytes.end());
  for (size_t at = 0; at < rounds_bytes; at += slot_bytes) {
    const uint64_t generation = ctx.generation() + 1;
    const size_t own = piece(r, at);
    char* slot = ctx.stage_slot(generation);
    if (own > 0) std::memcpy(slot, src + at, own);
    ctx.arrive(generation);
    char* mine = dst[static_cast<size_t>(r)];
    if (own > 0 && mine != src) std::memcpy(mine + at, slot, own);
    ctx.wait_generation(generation);
    for (int step = 1; step < n; ++step) {
      const int p = (r + step) % n;
      if (const size_t len = piece(p, at); len > 0)
        std::memcpy(dst[static_cast<size_t>(p)] + at, ctx.stage_slot_of(p, generation), len);
    }
  }
}

// Rounds of a staged scatter: in each, this rank copies the next piece (at byte `at`, the
// slot's share per peer) of its data for every other rank q, outgoing(q) of outgoing_bytes(q)
// bytes, into its slot (n - 1 places), arrives, and once all have arrived calls
// arrived(at, staged, piece) where staged(p) is the piece rank p left for this rank.
template <class Outgoing, class OutgoingBytes, class Arrived>
void staged_scatter(transport::SharedMemory& ctx, size_t rounds_bytes, Outgoing outgoing,
                    OutgoingBytes outgoing_bytes, Arrived arrived) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t piece = ctx.stage_slot_bytes() / static_cast<size_t>(n - 1) / 64 * 64;
  KOLO_ASSERT(piece > 0);
  // Where rank p puts the piece meant for rank q in its slot.
  auto place = [&](int p, int q) { return static_cast<size_t>((q - p - 1 + n) % n) * piece; };
  for (size_t at = 0; at < rounds_bytes; at += piece) {
    const uint64_t generation = ctx.generation() + 1;
    char* slot = ctx.stage_slot(generation);
    for (int q = 0; q < n; ++q) {
      const size_t total = q == r ? 0 : outgoing_bytes(q);
      if (at < total)
        std::memcpy(slot + place(r, q), outgoing(q) + at, std::min(piece, total - at));
    }
    ctx.arrive(generation);
    ctx.wait_generation(generation);
    arrived(
        at, [&](int p) { return ctx.stage_slot_of(p, generation) + place(p, r); }, piece);
  }
}

// The reduce-scatter of the staged path: rank r ends with out[0..blocks[r].count) = block r
// of every rank's input combined (averaged for kAverage), in rank order as reduce_from_peers.
void staged_reduce_scatter(transport::SharedMemory& ctx, const char* in, char* out,
                           const std::vector<Block>& blocks, DType dtype, ReduceOp op) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t esize = dtype_size(dtype);
  auto block_bytes = [&](int q) { return blocks[static_cast<size_t>(q)].count * esize; };
  size_t most = 0;
  for (int q = 0; q < n; ++q) most = std::max(most, block_bytes(q));
  const char* own = in + blocks[static_cast<size_t>(r)].offset * esize;
  staged_scatter(
      ctx, most, [&](int q) { return in + blocks[static_cast<size_t>(q)].offset * esize; },
      block_bytes,
      [&](size_t at, auto staged, size_t piece) {
        if (at >= block_bytes(r)) return;
        const size_t count = std::min(piece, block_bytes(r) - at) / esize;
        combine_in_rank_order(out + at, own + at, r, n, count, dtype, op, staged);
      });
}

// The staged allreduce, both halves in one pass of rounds. In each round a rank leaves the next
// piece of every peer's block of its input in its slot (as staged_scatter) and arrives; once
// all have, it combines its own block's piece from the staged ones (in rank order) into its
// output and copies the result, still in cache, to its other slot (the next generation's), and
// arrives again; once all have, it copies every peer's reduced piece into its output. Two
// passes (a staged reduce-scatter, then a staged allgather of the reduced blocks) would read
// each reduced block back from the output after it had left the caches.
// `blocks`: every rank's even_block of the count.
void staged_allreduce(transport::SharedMemory& ctx, const char* in, char* out,
                      const std::vector<Block>& blocks, DType dtype, ReduceOp op) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t esize = dtype_size(dtype);
  auto start = [&](int p) { return blocks[static_cast<size_t>(p)].offset * esize; };
  auto block_bytes = [&](int p) { return blocks[static_cast<size_t>(p)].count * esize; };
  staged_scatter(
      ctx, block_bytes(0),  // even_block: block 0 is the largest
      [&](int q) { return in + start(q); }, block_bytes,
      [&](size_t at, auto staged, size_t piece) {
        auto length = [&](int p) {
          return at < block_bytes(p) ? std::min(piece, block_bytes(p) - at) : size_t{0};
        };
        const uint64_t reduced = ctx.generation() + 1;
        if (const size_t len = length(r); len > 0) {
          // Into the output, then to the slot: the combine's vector stores straight into the
          // slot, whose lines a peer read in the round before, took 123-134 us at np=2 and
          // 1 MiB against 73-81 us.
          char* sum = out + start(r) + at;
          combine_in_rank_order(sum, in + start(r) + at, r, n, len / esize, dtype, op, staged);
          std::memcpy(ctx.stage_slot(reduced), sum, len);
        }
        ctx.arrive(reduced);
        ctx.wait_generation(reduced);
        for (int step = 1; step < n; ++step) {
          const int p = (r + step) % n;
          if (const size_t len = length(p); len > 0)
            std::memcpy(out + start(p) + at, ctx.stage_slot_of(p, reduced), len);
        }
      });
}

}  // namespace

void shm_low_latency_allreduce(transport::SharedMemory& ctx, const void* send, void* recv,
                               size_t count, DType dtype, ReduceOp op) {
  const int n = ctx.size();
  const size_t bytes = count * dtype_size(dtype);
  KOLO_ASSERT(bytes <= ctx.small_slot_bytes());
  const uint64_t generation = ctx.generation() + 1;
  std::memcpy(ctx.small_slot(generation), send, bytes);
  ctx.arrive(generation);
  ctx.wait_generation(generation);
  combine_step(recv, ctx.small_slot_of(0, generation), ctx.small_slot_of(1, generation), count,
               dtype, op, 1, n);
  for (int p = 2; p < n; ++p)
    combine_step(recv, recv, ctx.small_slot_of(p, generation), count, dtype, op, p, n);
}

void shm_direct_allreduce(transport::SharedMemory& ctx, const void* send, void* recv, size_t count,
                          DType dtype, ReduceOp op) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t esize = dtype_size(dtype);
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  ctx.publish(0, send);
  ctx.publish(1, recv);
  ctx.sync();  // inputs ready and addresses visible
  const Block mine = even_block(count, n, r);
  const size_t offset = mine.offset * esize;
  if (!ctx.plain_reads(0) || !ctx.plain_reads(1)) {
    std::vector<Block> blocks;
    for (int p = 0; p < n; ++p) blocks.push_back(even_block(count, n, p));
    if (ctx.one_pass_staging()) return staged_allreduce(ctx, in, out, blocks, dtype, op);
    std::vector<size_t> bytes;
    std::vector<char*> dst;
    for (const Block& b : blocks) {
      bytes.push_back(b.count * esize);
      dst.push_back(out + b.offset * esize);
    }
    staged_reduce_scatter(ctx, in, out + offset, blocks, dtype, op);
    return staged_exchange(ctx, out + offset, bytes, dst);
  }
  // Each owner writes its reduced block into every output (block r of a peer's buffer is read
  // by rank r alone, before r writes it, so in place is safe too): one read of every input
  // byte and one write of every output byte per rank.
  const bool apart = send != recv;
  reduce_from_peers(ctx, 0, offset, in + offset, out + offset, mine.count * esize, dtype, op, 1,
                    apart && count * esize >= kStreamingBytes,
                    apart && count * esize >= kOwnStreamingBytes);
  ctx.sync();  // every block written everywhere; nobody touches our buffers any more
}

void shm_direct_reduce_scatter(transport::SharedMemory& ctx, const void* send, void* recv,
                               size_t recv_count, DType dtype, ReduceOp op) {
  const size_t bytes = recv_count * dtype_size(dtype);
  const size_t offset = static_cast<size_t>(ctx.rank()) * bytes;
  ctx.publish(0, send);
  ctx.sync();
  if (!ctx.plain_reads(0)) {
    std::vector<Block> blocks;
    for (int p = 0; p < ctx.size(); ++p)
      blocks.push_back({static_cast<size_t>(p) * recv_count, recv_count});
    return staged_reduce_scatter(ctx, static_cast<const char*>(send), static_cast<char*>(recv),
                                 blocks, dtype, op);
  }
  reduce_from_peers(ctx, 0, offset, static_cast<const char*>(send) + offset,
                    static_cast<char*>(recv), bytes, dtype, op);
  ctx.sync();
}

void shm_direct_allgatherv(transport::SharedMemory& ctx, const void* send, void* recv,
                           const std::vector<size_t>& counts, DType dtype) {
  const int n = ctx.size();
  const size_t esize = dtype_size(dtype);
  std::vector<size_t> bytes(static_cast<size_t>(n));
  std::vector<char*> dst(static_cast<size_t>(n));
  size_t offset = 0;
  for (int p = 0; p < n; ++p) {
    bytes[static_cast<size_t>(p)] = counts[static_cast<size_t>(p)] * esize;
    dst[static_cast<size_t>(p)] = static_cast<char*>(recv) + offset;
    offset += bytes[static_cast<size_t>(p)];
  }
  const char* in = static_cast<const char*>(send);
  ctx.publish(0, send);
  ctx.sync();
  if (!ctx.plain_reads(0)) return staged_exchange(ctx, in, bytes, dst);
  const size_t own = bytes[static_cast<size_t>(ctx.rank())];
  if (dst[static_cast<size_t>(ctx.rank())] != in)
    std::memcpy(dst[static_cast<size_t>(ctx.rank())], in, own);
  for (int p = 0; p < n; ++p)
    if (p != ctx.rank())
      ctx.read_peer(p, ctx.peer_address(p, 0), dst[static_cast<size_t>(p)],
                    bytes[static_cast<size_t>(p)]);
  ctx.sync();
}

void shm_direct_broadcast(transport::SharedMemory& ctx, void* data, size_t bytes, int root) {
  ctx.publish(0, data);
  ctx.sync();
  if (!ctx.plain_reads(0)) {
    std::vector<size_t> sizes(static_cast<size_t>(ctx.size()), 0);
    sizes[static_cast<size_t>(root)] = bytes;
    std::vector<char*> dst(static_cast<size_t>(ctx.size()), static_cast<char*>(data));
    return staged_exchange(ctx, static_cast<const char*>(data), sizes, dst);
  }
  if (ctx.rank() != root) ctx.read_peer(root, ctx.peer_address(root, 0), data, bytes);
  ctx.sync();
}

namespace {

// Every rank throws kMismatch when some rank sends another size than its receiver expects;
// `generation`'s staging slots hold every rank's send sizes, then its receive sizes (then its
// send offsets).
void check_alltoallv_sizes(transport::SharedMemory& ctx, uint64_t generation) {
  const size_t n = static_cast<size_t>(ctx.size());
  for (size_t p = 0; p < n; ++p) {
    const auto* from =
        reinterpret_cast<const uint64_t*>(ctx.stage_slot_of(static_cast<int>(p), generation));
    for (size_t q = 0; q < n; ++q) {
      const auto* to =
          reinterpret_cast<const uint64_t*>(ctx.stage_slot_of(static_cast<int>(q), generation));
      if (p != q && from[q] != to[n + p])
        KOLO_THROW(ErrorCode::kMismatch, "alltoall on rank ", ctx.rank(), ": rank ", p, " sends ",
                   from[q], " B to rank ", q, ", which expects ", to[n + p],
                   " B from it (the ranks passed different counts)");
    }
  }
}

// Which way an alltoall of ordinary buffers moves blocks of kKernelReadBlockBytes up to
// kKernelReadAlwaysBytes: rank 0 of each communicator times both, kTrials times each, per size
// class (a power of two of the largest block) and rank count, then keeps to the faster (its best
// time). It publishes the choice for every class with the op's sizes, so every rank takes the
// same way whatever its own timings. Kept per process: these are properties of the machine.
// Oversubscribed ranks always read through the kernel: there a staged round waits for every
// rank to be scheduled (np=8 on 2 cores, 4 MiB: 1952-2163 us against 2845-3939 staged), and
// rank 0's timings vary too much to choose by.
class PathTrials {
 public:
  static constexpr int kClasses = 5;  // 32, 64, 128, 256, 512 KiB
  static constexpr int kMaxRanks = 64;
  static constexpr int kTrials = 3;

  // Bit c set: blocks of class c go through the kernel in this op.
  uint64_t choices(int n) {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t mask = 0;
    for (int c = 0; c < kClasses; ++c) {
      const Entry& e = at(n, c);
      const bool trying = e.tries[0] < kTrials || e.tries[1] < kTrials;
      const bool kernel = trying ? e.tries[1] <= e.tries[0] : e.best[1] <= e.best[0];
      if (kernel) mask |= uint64_t{1} << c;
    }
    return mask;
  }
  void record(int n, int c, bool kernel, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& e = at(n, c);
    const int way = kernel ? 1 : 0;
    if (e.tries[way] == 0 || seconds < e.best[way]) e.best[way] = seconds;
    if (e.tries[way] == kTrials) return;
    if (++e.tries[way] == kTrials && e.tries[1 - way] == kTrials) {
      const bool faster = e.best[1] <= e.best[0];
      KOLO_LOG(kInfo, "alltoall at ", n, " ranks, largest blocks of ",
               (kKernelReadBlockBytes << c) / 1024, " KiB: ", faster ? "kernel reads" : "staging",
               " (best of ", kTrials, ": kernel reads ", e.best[1] * 1e6, " us, staging ",
               e.best[0] * 1e6, " us)");
    }
  }
  // The class of a largest block in [kKernelReadBlockBytes, kKernelReadAlwaysBytes).
  static int class_of(size_t block) {
    int c = 0;
    for (size_t b = kKernelReadBlockBytes * 2; b <= block && c + 1 < kClasses; b *= 2) ++c;
    return c;
  }

 private:
  struct Entry {
    double best[2] = {0, 0};  // staged, kernel
    int tries[2] = {0, 0};
  };
  Entry& at(int n, int c) { return table_[static_cast<size_t>(std::min(n, kMaxRanks) - 1)][c]; }
  std::mutex mutex_;
  std::array<std::array<Entry, kClasses>, kMaxRanks> table_{};
};

PathTrials& path_trials() {
  static PathTrials trials;
  return trials;
}

// The largest block any rank sends another (from `generation`'s slots: the same on every rank).
size_t largest_block(transport::SharedMemory& ctx, uint64_t generation) {
  const int n = ctx.size();
  uint64_t most = 0;
  for (int p = 0; p < n; ++p) {
    const auto* from = reinterpret_cast<const uint64_t*>(ctx.stage_slot_of(p, generation));
    for (int q = 0; q < n; ++q)
      if (q != p) most = std::max(most, from[q]);
  }
  return static_cast<size_t>(most);
}

}  // namespace

// When every send buffer can be read with plain loads (alloc_shared buffers, or ranks that are
// threads of one process), rank r copies its block straight from each peer's send buffer, at
// the offset the peer published: one copy per byte. Ordinary buffers are read the same way
// through the kernel (process_vm_readv) when blocks are large enough for its per-call cost
// (kKernelReadAlwaysBytes, and from kKernelReadBlockBytes where PathTrials found it faster
// than staging). Otherwise every rank stages its blocks for the others piece by
// piece; the rounds run to the largest block any rank sends, agreed through the published
// values.
void shm_direct_alltoallv(transport::SharedMemory& ctx, const char* send,
                          const std::vector<size_t>& send_bytes,
                          const std::vector<size_t>& send_offsets, char* recv,
                          const std::vector<size_t>& recv_bytes,
                          const std::vector<size_t>& recv_offsets) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t self = static_cast<size_t>(r);
  size_t most = 0;
  for (int q = 0; q < n; ++q)
    if (q != r) most = std::max(most, send_bytes[static_cast<size_t>(q)]);
  ctx.publish_value(0, most);
  ctx.publish(1, send);
  // Every rank's sizes and offsets go through its staging slot of this generation (the rounds
  // below use the other one), so that every rank can check every pair of ranks agrees.
  const uint64_t generation = ctx.generation() + 1;
  const size_t un = static_cast<size_t>(n);
  auto* sizes = reinterpret_cast<uint64_t*>(ctx.stage_slot(generation));
  KOLO_ASSERT((3 * un + 1) * sizeof(uint64_t) <= ctx.stage_slot_bytes());
  for (size_t q = 0; q < un; ++q) {
    sizes[q] = send_bytes[q];
    sizes[un + q] = recv_bytes[q];
    sizes[2 * un + q] = send_offsets[q];
  }
  const bool timing = r == 0 && !ctx.oversubscribed();
  const auto start =
      timing ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  if (r == 0) sizes[3 * un] = timing ? path_trials().choices(n) : ~uint64_t{0};
  ctx.arrive(generation);
  ctx.wait_generation(generation);
  check_alltoallv_sizes(ctx, generation);
  // Rank 0 times the ways whose choice it published (a trial or the faster one).
  int trial_class = -1;
  bool kernel = false;
  if (!ctx.plain_reads(1) && ctx.kernel_reads()) {
    const size_t block = largest_block(ctx, generation);
    if (block >= kKernelReadAlwaysBytes) {
      kernel = true;
    } else if (block >= kKernelReadBlockBytes) {
      trial_class = PathTrials::class_of(block);
      const auto* root = reinterpret_cast<const uint64_t*>(ctx.stage_slot_of(0, generation));
      kernel = (root[3 * un] >> trial_class & 1) != 0;
    }
  }
  struct Timed {  // records rank 0's time when the op returns (not when it throws)
    int trial_class, n;
    bool kernel, record;
    std::chrono::steady_clock::time_point start;
    ~Timed() {
      if (!record || std::uncaught_exceptions() > 0) return;
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      path_trials().record(n, trial_class, kernel, took.count());
    }
  } timed{trial_class, n, kernel, timing && trial_class >= 0, start};
  if (ctx.plain_reads(1) || kernel) {
    if (send_bytes[self] > 0)
      std::memmove(recv + recv_offsets[self], send + send_offsets[self], send_bytes[self]);
    for (int step = 1; step < n; ++step) {
      const int p = (r - step + n) % n;  // each step reads from a different peer
      const size_t up = static_cast<size_t>(p);
      const auto* theirs = reinterpret_cast<const uint64_t*>(ctx.stage_slot_of(p, generation));
      if (recv_bytes[up] > 0)
        ctx.read_peer(p, ctx.peer_address(p, 1) + theirs[2 * un + self], recv + recv_offsets[up],
                      recv_bytes[up]);
    }
    ctx.sync();  // nobody reads our send buffer (or our published offsets) any more
    return;
  }
  for (int p = 0; p < n; ++p) most = std::max<size_t>(most, ctx.peer_value(p, 0));
  // Peers may publish again once past the next barrier: with no rounds, that barrier must
  // still come after everyone has read the values.
  if (most == 0) ctx.sync();
  if (send_bytes[self] > 0)
    std::memmove(recv + recv_offsets[self], send + send_offsets[self], send_bytes[self]);
  staged_scatter(
      ctx, most, [&](int q) { return send + send_offsets[static_cast<size_t>(q)]; },
      [&](int q) { return send_bytes[static_cast<size_t>(q)]; },
      [&](size_t at, auto staged, size_t piece) {
        for (int step = 1; step < n; ++step) {
          const size_t p = static_cast<size_t>((r + step) % n);
          if (at < recv_bytes[p])
            std::memcpy(recv + recv_offsets[p] + at, staged(static_cast<int>(p)),
                        std::min(piece, recv_bytes[p] - at));
        }
      });
}

}  // namespace kolo::collectives
