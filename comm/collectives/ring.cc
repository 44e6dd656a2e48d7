// Ring reduce-scatter, allgather(v) and allreduce.
//
// Blocks are numbered 0..n-1; rank r sends to next = r+1 and receives from prev = r-1 (mod n).
// Reduce-scatter, step s = 0..n-2: send block (r-s-1), receive block (r-s-2) and combine it with
// our own input of that block. After n-1 steps rank r holds block r reduced over all ranks.
// Allgather, step s = 0..n-2: send block (r-s), receive block (r-s-1). Both phases move data in
// segments: a segment reduced (or received) in step s is posted to next at once, so step s+1
// begins flowing before step s ends.
#include <cstring>
#include <deque>

#include "comm/collectives/collectives.h"
#include "comm/reduce/reduce.h"

namespace kolo::collectives {
namespace {

using transport::Transfer;

int mod(int a, int n) {
  return ((a % n) + n) % n;
}

// Posted transfers live here until the end of a phase (the transport holds pointers to them).
class Posted {
 public:
  explicit Posted(Context& ctx) : ctx_(ctx) {}
  Transfer* send(int peer, const void* data, size_t bytes) {
    return post(Transfer::send(peer, data, bytes));
  }
  Transfer* recv(int peer, void* data, size_t bytes) {
    return post(Transfer::recv(peer, data, bytes));
  }
  void wait(Transfer* t) { ctx_.wait(t); }
  void wait_all() {
    for (auto& t : transfers_) ctx_.wait(&t);
    transfers_.clear();
  }

 private:
  Transfer* post(Transfer t) {
    transfers_.push_back(t);
    ctx_.post(&transfers_.back());
    return &transfers_.back();
  }
  Context& ctx_;
  std::deque<Transfer> transfers_;  // deque: pointers stay valid as it grows
};

// Posts `bytes` from `data` to peer in kSegmentBytes pieces (the receiver uses the same cut).
void post_segmented_send(Posted& posted, int peer, const char* data, size_t bytes) {
  for (size_t at = 0; at < bytes; at += kSegmentBytes)
    posted.send(peer, data + at, std::min(kSegmentBytes, bytes - at));
}

// Reduce-scatter over arbitrary blocks. input(b): our contribution to block b. dest(b, last):
// where the reduced block b goes (the final block when `last`). Returns nothing; the caller
// knows where block r ended.
template <typename Input, typename Dest>
void reduce_scatter_blocks(Context& ctx, const std::vector<Block>& blocks, DType dtype, ReduceOp op,
                           Input input, Dest dest) {
  const int n = ctx.size(), r = ctx.rank();
  const int next = mod(r + 1, n), prev = mod(r - 1, n);
  const size_t esize = dtype_size(dtype);
  std::vector<char> scratch(2 * kSegmentBytes);
  // Sends are grouped by the step that posted them. The group of step s-1 is awaited at the end
  // of step s: by then next has entered step s and receives them, and step s+1 may reuse the
  // staging buffer they read. (Awaiting step s's own sends there would deadlock the ring.)
  std::deque<Posted> sends;
  sends.emplace_back(ctx);
  sends.emplace_back(ctx);
  Posted recvs(ctx);

  const Block& first = blocks[mod(r - 1, n)];
  post_segmented_send(sends[1], next, input(mod(r - 1, n)), first.count * esize);
  for (int s = 0; s <= n - 2; ++s) {
    const int b = mod(r - s - 2, n);
    const bool last = s == n - 2;
    const size_t bytes = blocks[b].count * esize;
    char* out = dest(b, s);
    const char* in = input(b);
    // Double-buffered receive: segment k+1 arrives while segment k is combined.
    auto slot = [&](size_t k) { return scratch.data() + (k % 2) * kSegmentBytes; };
    Transfer* pending = bytes ? recvs.recv(prev, slot(0), std::min(kSegmentBytes, bytes)) : nullptr;
    for (size_t at = 0, k = 0; at < bytes; at += kSegmentBytes, ++k) {
      size_t seg = std::min(kSegmentBytes, bytes - at);
      recvs.wait(pending);
      if (at + seg < bytes)
        pending = recvs.recv(prev, slot(k + 1), std::min(kSegmentBytes, bytes - at - seg));
      reduce::combine(out + at, slot(k), in + at, seg / esize, dtype, op);
      if (!last) sends[s % 2].send(next, out + at, seg);
    }
    recvs.wait_all();
    sends[(s + 1) % 2].wait_all();
  }
  sends[0].wait_all();
  sends[1].wait_all();
}

// Allgather over arbitrary blocks held in one buffer; block r is already in place.
void allgather_blocks(Context& ctx, char* data, const std::vector<Block>& blocks, size_t esize) {
  const int n = ctx.size(), r = ctx.rank();
  const int next = mod(r + 1, n), prev = mod(r - 1, n);
  Posted posted(ctx);
  post_segmented_send(posted, next, data + blocks[r].offset * esize, blocks[r].count * esize);
  for (int s = 0; s <= n - 2; ++s) {
    const Block& blk = blocks[mod(r - s - 1, n)];
    char* at_block = data + blk.offset * esize;
    const size_t bytes = blk.count * esize;
    for (size_t at = 0; at < bytes; at += kSegmentBytes) {
      size_t seg = std::min(kSegmentBytes, bytes - at);
      posted.wait(posted.recv(prev, at_block + at, seg));
      // Forward what we just received, except in the last step (next already has it).
      if (s < n - 2) posted.send(next, at_block + at, seg);
    }
  }
  posted.wait_all();
}

std::vector<Block> even_blocks(size_t count, int n) {
  std::vector<Block> blocks;
  for (int b = 0; b < n; ++b) blocks.push_back(even_block(count, n, b));
  return blocks;
}

}  // namespace

Block even_block(size_t count, int blocks, int b) {
  size_t base = count / static_cast<size_t>(blocks), extra = count % static_cast<size_t>(blocks);
  size_t ub = static_cast<size_t>(b);
  return {ub * base + std::min(ub, extra), base + (ub < extra ? 1 : 0)};
}

void ring_allreduce(Context& ctx, void* data, size_t count, DType dtype, ReduceOp op) {
  const size_t esize = dtype_size(dtype);
  char* base = static_cast<char*>(data);
  auto blocks = even_blocks(count, ctx.size());
  auto at = [&](int b) { return base + blocks[b].offset * esize; };
  reduce_scatter_blocks(ctx, blocks, dtype, op, at, [&](int b, int) { return at(b); });
  const Block& own = blocks[ctx.rank()];
  // Average divides once, by the owner, so every rank ends with the same bits.
  if (op == ReduceOp::kAverage)
    reduce::finish_average(at(ctx.rank()), own.count, dtype, ctx.size());
  allgather_blocks(ctx, base, blocks, esize);
}

void ring_reduce_scatter(Context& ctx, const void* send, void* recv, size_t recv_count, DType dtype,
                         ReduceOp op) {
  const int n = ctx.size();
  const size_t esize = dtype_size(dtype), bytes = recv_count * esize;
  const char* in = static_cast<const char*>(send);
  std::vector<Block> blocks;
  for (int b = 0; b < n; ++b) blocks.push_back({static_cast<size_t>(b) * recv_count, recv_count});
  // Partial sums travel through two staging blocks, alternating by step; the last lands in recv.
  std::vector<char> staging(2 * bytes);
  auto input = [&](int b) { return in + static_cast<size_t>(b) * bytes; };
  auto dest = [&](int, int s) {
    return s == n - 2 ? static_cast<char*>(recv) : staging.data() + (s % 2) * bytes;
  };
  reduce_scatter_blocks(ctx, blocks, dtype, op, input, dest);
  if (op == ReduceOp::kAverage) reduce::finish_average(recv, recv_count, dtype, n);
}

void ring_allgatherv(Context& ctx, void* recv, const std::vector<size_t>& counts, DType dtype) {
  std::vector<Block> blocks;
  size_t offset = 0;
  for (size_t c : counts) {
    blocks.push_back({offset, c});
    offset += c;
  }
  allgather_blocks(ctx, static_cast<char*>(recv), blocks, dtype_size(dtype));
}

}  // namespace kolo::collectives
