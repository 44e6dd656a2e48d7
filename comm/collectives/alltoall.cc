// Pairwise-exchange alltoall(v): in step s = 1..n-1 rank r sends its block for r+s and receives
// the block from r-s, so every step pairs each rank with exactly one sender and one receiver.
#include <cstring>

#include "comm/collectives/collectives.h"

namespace kolo::collectives {

using transport::Transfer;

void pairwise_alltoallv(Context& ctx, const char* send, const std::vector<size_t>& send_bytes,
                        const std::vector<size_t>& send_offsets, char* recv,
                        const std::vector<size_t>& recv_bytes,
                        const std::vector<size_t>& recv_offsets) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t self = static_cast<size_t>(r);
  if (send_bytes[self] > 0)
    std::memmove(recv + recv_offsets[self], send + send_offsets[self], send_bytes[self]);
  for (int s = 1; s < n; ++s) {
    const size_t to = static_cast<size_t>((r + s) % n), from = static_cast<size_t>((r - s + n) % n);
    Transfer out = Transfer::send(static_cast<int>(to), send + send_offsets[to], send_bytes[to]);
    Transfer in =
        Transfer::recv(static_cast<int>(from), recv + recv_offsets[from], recv_bytes[from]);
    ctx.post(&out);
    ctx.post(&in);
    ctx.wait(&in);
    ctx.wait(&out);
  }
}

}  // namespace kolo::collectives
