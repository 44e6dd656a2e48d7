// The CPU kernels' thread pool: parallel_for splits [0, n) into contiguous ranges, one per
// kernel thread (set_num_threads), the calling thread taking the first. The GEMMs thread
// inside OpenBLAS; everything else (element-wise, LayerNorm, attention heads, cross-entropy,
// reductions) goes through here.
#pragma once

#include <cstddef>
#include <type_traits>

namespace kolo::trainer::cpu {

// Resizes the pool to n threads in all (n - 1 workers). Not while a parallel_for runs.
void set_pool_threads(int n);
int pool_threads();

using RangeFn = void (*)(void* ctx, size_t begin, size_t end);
void parallel_for_impl(size_t n, size_t grain, RangeFn fn, void* ctx);

// Calls body(begin, end) over disjoint ranges covering [0, n): range boundaries are multiples
// of `grain` (>= 1), so a body that works in blocks of grain sees whole blocks, and how the
// ranges fall never changes a result that is computed block by block. Runs inline with one
// thread, when n <= grain, from inside another parallel_for, or while another thread holds the
// pool. The first exception a range throws is rethrown here after every range has finished.
template <typename F>
void parallel_for(size_t n, size_t grain, F&& body) {
  using Body = std::remove_reference_t<F>;
  parallel_for_impl(
      n, grain, [](void* ctx, size_t b, size_t e) { (*static_cast<Body*>(ctx))(b, e); },
      const_cast<void*>(static_cast<const void*>(&body)));
}

}  // namespace kolo::trainer::cpu
