// Recursive halving-doubling allreduce (Rabenseifner): a reduce-scatter by recursive halving
// followed by an allgather by recursive doubling, log2(p) steps each, moving about two buffers
// per rank in all. Suits mid-sized buffers, where the ring's n-1 steps of latency dominate.
//
// Protocol, for n ranks and p = the largest power of two <= n:
// 1. Fold: the first 2 * (n - p) ranks pair up (2i, 2i+1); the odd one sends its whole buffer
//    to the even one, which combines it, and sits out until step 4. The p ranks left take
//    virtual ranks v: rank 2i becomes v = i, rank r >= 2 * (n - p) becomes v = r - (n - p).
// 2. Reduce-scatter: the buffer is cut into p even blocks. At distance d = p/2, p/4, .., 1 a
//    rank holds a run of 2d blocks, starting at v with bits below 2d cleared; it exchanges
//    with partner v ^ d, keeping the half of the run selected by bit d of v (the lower half
//    when the bit is clear) and sending the other half, and combines what it receives. After
//    the last step v holds block v reduced over all ranks; an average is divided here, once.
// 3. Allgather: at distance d = 1, 2, .., p/2 a rank holds the d blocks starting at v with
//    bits below d cleared, sends them to partner v ^ d and receives the partner's d blocks.
// 4. Unfold: each even rank of step 1 sends the whole result to its odd partner.
// Every combine puts the lower virtual rank's operand first, so a block's reduction order is
// the same whichever rank computes it; all ranks end with the owners' bits. Empty ranges are
// skipped by both sides, which compute the same sizes.
#include <algorithm>
#include <bit>
#include <deque>
#include <vector>

#include "comm/collectives/collectives.h"
#include "comm/reduce/reduce.h"

namespace kolo::collectives {
namespace {

using transport::Transfer;

// Sends posted during one exchange; waited before the buffer they read may change.
class Sends {
 public:
  explicit Sends(Context& ctx) : ctx_(ctx) {}
  // Posts `bytes` from `data` in kSegmentBytes pieces (the receiver cuts the same way).
  void post(int peer, const char* data, size_t bytes) {
    for (size_t at = 0; at < bytes; at += kSegmentBytes) {
      transfers_.push_back(Transfer::send(peer, data + at, std::min(kSegmentBytes, bytes - at)));
      ctx_.post(&transfers_.back());
    }
  }
  void wait_all() {
    for (auto& t : transfers_) ctx_.wait(&t);
    transfers_.clear();
  }

 private:
  Context& ctx_;
  std::deque<Transfer> transfers_;  // deque: pointers stay valid as it grows
};

class HalvingDoubling {
 public:
  HalvingDoubling(Context& ctx, char* data, size_t count, DType dtype, ReduceOp op)
      : ctx_(ctx),
        data_(data),
        count_(count),
        dtype_(dtype),
        op_(op),
        esize_(dtype_size(dtype)),
        p_(std::bit_floor(static_cast<unsigned>(ctx.size()))),
        extra_(ctx.size() - p_) {}

  void run() {
    const int r = ctx_.rank();
    if (r < 2 * extra_ && r % 2 == 1) {
      // Folded out: contribute, then wait for the result.
      Sends sends(ctx_);
      sends.post(r - 1, data_, count_ * esize_);
      sends.wait_all();
      receive(r - 1, data_, count_ * esize_);
      return;
    }
    if (r < 2 * extra_) receive_combine(r + 1, data_, count_ * esize_, true);
    const int v = r < 2 * extra_ ? r / 2 : r - extra_;
    reduce_scatter(v);
    if (op_ == ReduceOp::kAverage)
      reduce::finish_average(at(v), blocks(v, v + 1).count, dtype_, ctx_.size());
    allgather(v);
    if (r < 2 * extra_) {
      Sends sends(ctx_);
      sends.post(r + 1, data_, count_ * esize_);
      sends.wait_all();
    }
  }

 private:
  // Real rank of virtual rank v.
  int real(int v) const { return v < extra_ ? 2 * v : v + extra_; }
  // Elements of blocks [first, last) of the p even blocks.
  Block blocks(int first, int last) const {
    Block a = even_block(count_, p_, first), b = even_block(count_, p_, last - 1);
    return {a.offset, b.offset + b.count - a.offset};
  }
  char* at(int block) const { return data_ + even_block(count_, p_, block).offset * esize_; }

  void reduce_scatter(int v) {
    int first = 0;  // the run [first, first + 2d) this rank still reduces
    for (int d = p_ / 2; d >= 1; d /= 2) {
      const int partner = v ^ d;
      const int keep = (v & d) ? first + d : first, give = (v & d) ? first : first + d;
      const Block kept = blocks(keep, keep + d), given = blocks(give, give + d);
      Sends sends(ctx_);
      sends.post(real(partner), at(give), given.count * esize_);
      receive_combine(real(partner), at(keep), kept.count * esize_, v < partner);
      sends.wait_all();
      first = keep;
    }
  }

  void allgather(int v) {
    for (int d = 1; d < p_; d *= 2) {
      const int partner = v ^ d;
      const int mine = v & ~(d - 1), theirs = partner & ~(d - 1);
      Sends sends(ctx_);
      sends.post(real(partner), at(mine), blocks(mine, mine + d).count * esize_);
      receive(real(partner), at(theirs), blocks(theirs, theirs + d).count * esize_);
      sends.wait_all();
    }
  }

  // Receives `bytes` in segments straight into dst.
  void receive(int peer, char* dst, size_t bytes) {
    for (size_t at = 0; at < bytes; at += kSegmentBytes) {
      Transfer in = Transfer::recv(peer, dst + at, std::min(kSegmentBytes, bytes - at));
      ctx_.post(&in);
      ctx_.wait(&in);
    }
  }

  // Receives `bytes` from peer in segments and combines them into dst, ours first when
  // `ours_first`. Double-buffered: segment k+1 arrives while segment k is combined.
  void receive_combine(int peer, char* dst, size_t bytes, bool ours_first) {
    if (bytes == 0) return;
    scratch_.resize(2 * kSegmentBytes);
    auto slot = [&](size_t k) { return scratch_.data() + (k % 2) * kSegmentBytes; };
    Transfer in[2];
    in[0] = Transfer::recv(peer, slot(0), std::min(kSegmentBytes, bytes));
    ctx_.post(&in[0]);
    for (size_t at = 0, k = 0; at < bytes; at += kSegmentBytes, ++k) {
      const size_t seg = std::min(kSegmentBytes, bytes - at);
      ctx_.wait(&in[k % 2]);
      if (at + seg < bytes) {
        in[(k + 1) % 2] =
            Transfer::recv(peer, slot(k + 1), std::min(kSegmentBytes, bytes - at - seg));
        ctx_.post(&in[(k + 1) % 2]);
      }
      char* out = dst + at;
      if (ours_first)
        reduce::combine(out, out, slot(k), seg / esize_, dtype_, op_);
      else
        reduce::combine(out, slot(k), out, seg / esize_, dtype_, op_);
    }
  }

  Context& ctx_;
  char* data_;
  size_t count_;
  DType dtype_;
  ReduceOp op_;
  size_t esize_;
  int p_;      // participants: the largest power of two <= size
  int extra_;  // size - p: the number of folded-out ranks
  std::vector<char> scratch_;
};

}  // namespace

void halving_doubling_allreduce(Context& ctx, void* data, size_t count, DType dtype, ReduceOp op) {
  HalvingDoubling(ctx, static_cast<char*>(data), count, dtype, op).run();
}

}  // namespace kolo::collectives
