// Dissemination barrier: in round k rank r signals r + 2^k and waits for r - 2^k. After
// ceil(log2 n) rounds every rank has heard, directly or transitively, from every other.
#include "comm/collectives/collectives.h"

namespace kolo::collectives {

using transport::Transfer;

void dissemination_barrier(Context& ctx) {
  const int n = ctx.size(), r = ctx.rank();
  char token_out = 1, token_in = 0;
  for (int distance = 1; distance < n; distance *= 2) {
    Transfer out = Transfer::send((r + distance) % n, &token_out, 1);
    Transfer in = Transfer::recv((r - distance + n) % n, &token_in, 1);
    ctx.post(&out);
    ctx.post(&in);
    ctx.wait(&in);
    ctx.wait(&out);
  }
}

}  // namespace kolo::collectives
