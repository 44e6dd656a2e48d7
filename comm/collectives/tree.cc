// Pipelined double binary tree allreduce: the buffer is cut in two halves, each reduced up one
// binary tree and broadcast back down it. The two trees are complementary (a rank that is a
// leaf in one is inner in the other), so every rank moves about one buffer's worth of data.
//
// Tree shape. Ranks get positions 1..n. The tree over positions [lo, hi] has as its root the
// position with the most trailing zero bits (unique in any interval), the tree over [lo, root-1]
// as left child and the tree over [root+1, hi] as right child. Odd positions are always leaves,
// and trailing zeros strictly fall along every downward path, so depth <= floor(log2 n).
// Tree 0 puts rank r at position r+1. Tree 1 mirrors it (position n-r) when n is even and shifts
// it (position (r+1) % n + 1) when n is odd, so every rank is a leaf in at least one tree.
//
// Schedule. Tree t carries elements [offset_t, offset_t + count_t) in segments of kSegmentBytes.
// All ranks run the same numbered phases; in each phase, for t = 0, 1, a rank at depth d
//   reduce step: for segment s = phase - (D - d): receives segment s from its children, combines
//     left child, own, right child (in that order, so the result is deterministic) and sends it
//     to its parent; the root divides an average here, once;
//   broadcast step: for segment s = phase - (D + d): receives the final segment s from its
//     parent (the root has it already) and sends it to its children;
// where D = floor(log2 n). Every message sent in phase p is received in phase p + 1 by the step
// of the same kind and tree, so the two ranks of a link post it in the same order even when
// both trees use the link; and a wait in phase p depends only on what other ranks posted in
// earlier phases, so no rank can block another. Segment s is reduced one level per phase and
// broadcast one level per phase while the next segments follow it.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <deque>
#include <vector>

#include "comm/collectives/collectives.h"
#include "comm/reduce/reduce.h"

namespace kolo::collectives {
namespace {

using transport::Transfer;

constexpr int kNoRank = -1;

// One rank's place in one tree and the elements that tree carries.
struct Tree {
  int parent = kNoRank;
  int children[2] = {kNoRank, kNoRank};  // left (lower position), right
  int depth = 0;
  size_t offset = 0;  // elements
  size_t count = 0;
  size_t segments = 0;
  std::vector<Transfer*> up;  // the send of each reduced segment to the parent
};

// The position in [lo, hi] with the most trailing zero bits: the root of that interval's tree.
int subtree_root(int lo, int hi) {
  for (int bit = std::bit_floor(static_cast<unsigned>(hi));; bit >>= 1)
    if (hi / bit * bit >= lo) return hi / bit * bit;
}

int position_of(int rank, int n, int tree) {
  if (tree == 0) return rank + 1;
  return n % 2 == 0 ? n - rank : (rank + 1) % n + 1;
}

int rank_at(int position, int n, int tree) {
  if (tree == 0) return position - 1;
  return n % 2 == 0 ? n - position : (position - 2 + n) % n;
}

// Walks down from the root of [1, n] to this rank's position, noting parent and depth.
Tree build_tree(int n, int rank, int which) {
  Tree t;
  const int position = position_of(rank, n, which);
  int lo = 1, hi = n;
  for (int root = subtree_root(lo, hi); root != position; root = subtree_root(lo, hi)) {
    t.parent = rank_at(root, n, which);
    ++t.depth;
    if (position < root)
      hi = root - 1;
    else
      lo = root + 1;
  }
  if (lo < position) t.children[0] = rank_at(subtree_root(lo, position - 1), n, which);
  if (position < hi) t.children[1] = rank_at(subtree_root(position + 1, hi), n, which);
  return t;
}

class TreeAllreduce {
 public:
  TreeAllreduce(Context& ctx, char* data, size_t count, DType dtype, ReduceOp op)
      : ctx_(ctx),
        data_(data),
        dtype_(dtype),
        op_(op),
        esize_(dtype_size(dtype)),
        segment_count_(kSegmentBytes / esize_),
        scratch_(2 * kSegmentBytes) {
    const size_t halves[2] = {count / 2, count - count / 2};
    for (int which = 0; which < 2; ++which) {
      Tree& t = trees_[which];
      t = build_tree(ctx.size(), ctx.rank(), which);
      t.offset = which == 0 ? 0 : halves[0];
      t.count = halves[which];
      t.segments = (t.count + segment_count_ - 1) / segment_count_;
      t.up.assign(t.segments, nullptr);
    }
  }

  void run() {
    const int64_t max_depth = std::bit_width(static_cast<unsigned>(ctx_.size())) - 1;
    const auto segments = static_cast<int64_t>(std::max(trees_[0].segments, trees_[1].segments));
    for (int64_t phase = 0; phase < segments + 2 * max_depth; ++phase) {
      for (Tree& t : trees_) {
        const int64_t reduce_at = phase - (max_depth - t.depth);
        const int64_t broadcast_at = phase - (max_depth + t.depth);
        if (reduce_at >= 0 && reduce_at < static_cast<int64_t>(t.segments))
          reduce_step(t, static_cast<size_t>(reduce_at));
        if (broadcast_at >= 0 && broadcast_at < static_cast<int64_t>(t.segments))
          broadcast_step(t, static_cast<size_t>(broadcast_at));
      }
    }
    for (auto& send : sends_) ctx_.wait(&send);
  }

 private:
  // Element count of segment s and where it lives in the user buffer.
  size_t segment_elements(const Tree& t, size_t s) const {
    return std::min(segment_count_, t.count - s * segment_count_);
  }
  char* segment_data(const Tree& t, size_t s) const {
    return data_ + (t.offset + s * segment_count_) * esize_;
  }
  Transfer* send(int peer, const char* data, size_t bytes) {
    sends_.push_back(Transfer::send(peer, data, bytes));
    ctx_.post(&sends_.back());
    return &sends_.back();
  }

  // Children's partial results arrive in scratch; own data becomes left + own + right.
  void reduce_step(Tree& t, size_t s) {
    const size_t elements = segment_elements(t, s), bytes = elements * esize_;
    char* own = segment_data(t, s);
    Transfer in[2];
    for (int c = 0; c < 2; ++c) {
      if (t.children[c] == kNoRank) continue;
      in[c] = Transfer::recv(t.children[c], scratch_.data() + c * kSegmentBytes, bytes);
      ctx_.post(&in[c]);
    }
    for (int c = 0; c < 2; ++c) {
      if (t.children[c] == kNoRank) continue;
      ctx_.wait(&in[c]);
      const char* theirs = scratch_.data() + c * kSegmentBytes;
      if (c == 0)
        reduce::combine(own, theirs, own, elements, dtype_, op_);
      else
        reduce::combine(own, own, theirs, elements, dtype_, op_);
    }
    if (t.parent != kNoRank)
      t.up[s] = send(t.parent, own, bytes);
    else if (op_ == ReduceOp::kAverage)
      reduce::finish_average(own, elements, dtype_, ctx_.size());
  }

  // The final segment overwrites our partial one: the send of the partial must be done first.
  void broadcast_step(Tree& t, size_t s) {
    const size_t bytes = segment_elements(t, s) * esize_;
    char* own = segment_data(t, s);
    if (t.parent != kNoRank) {
      ctx_.wait(t.up[s]);
      Transfer in = Transfer::recv(t.parent, own, bytes);
      ctx_.post(&in);
      ctx_.wait(&in);
    }
    for (int child : t.children)
      if (child != kNoRank) send(child, own, bytes);
  }

  Context& ctx_;
  char* data_;
  DType dtype_;
  ReduceOp op_;
  size_t esize_;
  size_t segment_count_;  // elements per segment
  std::vector<char> scratch_;
  Tree trees_[2];
  std::deque<Transfer> sends_;  // deque: pointers stay valid as it grows
};

}  // namespace

void tree_allreduce(Context& ctx, void* data, size_t count, DType dtype, ReduceOp op) {
  TreeAllreduce(ctx, static_cast<char*>(data), count, dtype, op).run();
}

}  // namespace kolo::collectives
