// Pipelined chain broadcast: the root streams segments to root+1, and every rank forwards each
// segment to the next rank as soon as it has it, so n ranks cost about one message time plus
// (n-1) segment times rather than (n-1) whole messages.
#include <algorithm>
#include <deque>

#include "comm/collectives/collectives.h"

namespace kolo::collectives {

using transport::Transfer;

void chain_broadcast(Context& ctx, void* data, size_t bytes, int root) {
  const int n = ctx.size(), r = ctx.rank();
  const int position = (r - root + n) % n;  // distance from the root along the chain
  const int next = (r + 1) % n, prev = (r - 1 + n) % n;
  char* base = static_cast<char*>(data);
  std::deque<Transfer> sends;
  for (size_t at = 0; at < bytes; at += kSegmentBytes) {
    size_t seg = std::min(kSegmentBytes, bytes - at);
    if (position > 0) {
      Transfer in = Transfer::recv(prev, base + at, seg);
      ctx.post(&in);
      ctx.wait(&in);
    }
    if (position < n - 1) {
      sends.push_back(Transfer::send(next, base + at, seg));
      ctx.post(&sends.back());
    }
  }
  for (auto& t : sends) ctx.wait(&t);
}

}  // namespace kolo::collectives
