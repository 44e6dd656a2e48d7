// Copies whose destination should bypass the caches: non-temporal (streaming) stores, no
// read-for-ownership of the destination's lines. For large outputs nobody reads soon (a big
// collective's result), and for the copy bound of allreduce_bw that measures them.
#pragma once

#include <cstddef>

namespace kolo {

// memcpy(dst, src, bytes) with streaming stores for the 16-byte-aligned middle of dst (plain
// copies for the head and the tail), then a store fence. Regions must not overlap.
void copy_streaming(void* dst, const void* src, size_t bytes);

}  // namespace kolo
