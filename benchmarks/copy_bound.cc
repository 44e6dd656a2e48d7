// Copy rates for allreduce_bw's bound column. Every rank copies at the same time (a barrier
// before each timed loop), as every rank moves data at once in a collective; the time per copy
// is the slowest rank's.
#include "benchmarks/copy_bound.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace kolo::bench {
namespace {

// Non-temporal stores: the destination bypasses the caches (no read-for-ownership of its
// lines), the way a large collective's output is best written.
void stream_copy(void* dst, const void* src, size_t bytes) {
#if defined(__SSE2__)
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  size_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  _mm_sfence();
  std::memcpy(d + i, s + i, bytes - i);
#else
  std::memcpy(dst, src, bytes);
#endif
}

template <typename Copy>
double rate_gbps(Communicator& comm, const void* src, void* dst, size_t bytes, int iters,
                 Copy copy) {
  copy(dst, src, bytes);  // pages touched, caches in their steady state
  comm.barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) copy(dst, src, bytes);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  double seconds = elapsed.count() / iters;
  comm.allreduce(&seconds, &seconds, 1, DType::kFloat64, ReduceOp::kMax);
  return static_cast<double>(bytes) / seconds / 1e9;
}

}  // namespace

CopyBound measure_copy_bound(Communicator& comm, const void* src, void* dst, size_t bytes,
                             int iters) {
  CopyBound bound;
  if (bytes == 0) return bound;
  constexpr size_t kMinBytesCopied = size_t{64} << 20;
  size_t n = static_cast<size_t>(std::max(iters, 1));
  if (n * bytes < kMinBytesCopied)
    n = std::max(n, std::min<size_t>(1000, (kMinBytesCopied + bytes - 1) / bytes));
  bound.memcpy_gbps = rate_gbps(comm, src, dst, bytes, static_cast<int>(n),
                                [](void* d, const void* s, size_t b) { std::memcpy(d, s, b); });
  bound.stream_gbps = rate_gbps(comm, src, dst, bytes, static_cast<int>(n), stream_copy);
  return bound;
}

}  // namespace kolo::bench
