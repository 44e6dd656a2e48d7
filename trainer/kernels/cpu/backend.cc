// The CPU backend object and its memory, conversion and reduction methods; the kernels live
// in the sibling files (gemm.cc, layernorm.cc, attention.cc, ...). Conversion is kolo::convert.
#include <cblas.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/base/convert.h"
#include "trainer/kernels/cpu/avx512.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/kernels/cpu/gemm.h"
#include "trainer/kernels/cpu/parallel.h"
#include "trainer/kernels/cpu/vec.h"

namespace kolo::trainer {
namespace cpu {
namespace {

constexpr size_t kAlignment = 64;

struct AlignedFree {
  void operator()(float* p) const { std::free(p); }
};
struct ScratchBuffer {
  std::unique_ptr<float, AlignedFree> data;
  size_t capacity = 0;
};

}  // namespace

float* scratch(Slot slot, size_t n) {
  thread_local ScratchBuffer buffers[static_cast<int>(Slot::kCount)];
  ScratchBuffer& buffer = buffers[static_cast<int>(slot)];
  if (n > buffer.capacity) {
    // Rounded up to whole vectors so kernels may load and store full lanes at the end.
    const size_t capacity = (n + 2 * kLanes) / kLanes * kLanes;
    // aligned_alloc needs a size that is a multiple of the alignment (C11 7.22.3.1).
    const size_t bytes = (capacity * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, bytes);
    if (p == nullptr) {
      KOLO_THROW(ErrorCode::kInvalidArgument, "cpu scratch: cannot allocate ",
                 capacity * sizeof(float), " bytes");
    }
    buffer.data.reset(static_cast<float*>(p));
    buffer.capacity = capacity;
  }
  return buffer.data.get();
}

namespace {

// Squares summed in fp32 lanes over blocks of 4096 elements, blocks summed in double in
// order, so the result keeps fp32-level relative accuracy at any n and does not depend on the
// thread count. A lane is nonfinite when |x| is not below infinity (inf, or NaN through the
// unordered compare).
template <typename S>
double sum_squares_kernel(const typename S::T* x, size_t n, bool* nonfinite) {
  constexpr size_t kBlock = 4096;
  thread_local std::vector<double> sums;
  sums.assign((n + kBlock - 1) / kBlock, 0.0);
  double* block_sums = sums.data();
  std::atomic<bool> bad_any{false};
  parallel_for(n, kBlock * 16, [&](size_t begin, size_t end) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256 inf = _mm256_set1_ps(__builtin_inff());
    __m256 bad = _mm256_setzero_ps();
    for (size_t start = begin; start < end; start += kBlock) {
      const size_t stop = std::min(end, start + kBlock);
      __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
      size_t i = start;
      for (; i + 2 * kLanes <= stop; i += 2 * kLanes) {
        const __m256 a = S::load(x + i), b = S::load(x + i + kLanes);
        acc0 = _mm256_fmadd_ps(a, a, acc0);
        acc1 = _mm256_fmadd_ps(b, b, acc1);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_and_ps(a, abs_mask), inf, _CMP_NLT_UQ));
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_and_ps(b, abs_mask), inf, _CMP_NLT_UQ));
      }
      for (; i < stop; i += kLanes) {
        const __m256 a = load_n<S>(x + i, stop - i);
        acc0 = _mm256_fmadd_ps(a, a, acc0);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_and_ps(a, abs_mask), inf, _CMP_NLT_UQ));
      }
      block_sums[start / kBlock] = hsum(_mm256_add_ps(acc0, acc1));
    }
    if (_mm256_movemask_ps(bad) != 0) bad_any.store(true, std::memory_order_relaxed);
  });
  if (bad_any.load()) *nonfinite = true;
  double total = 0;
  for (double v : sums) total += v;
  return total;
}

}  // namespace
}  // namespace cpu

using namespace cpu;

void set_num_threads(int n) {
  KOLO_CHECK_ARG(n >= 1, "set_num_threads: thread count must be >= 1, got ", n);
  set_pool_threads(n);
}
int num_threads() {
  return pool_threads();
}

void* CpuBackend::alloc(size_t bytes) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded >= kMapBytes) {
    void* m = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      KOLO_THROW(ErrorCode::kInvalidArgument, "cpu alloc: cannot map ", bytes, " bytes");
    }
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    std::lock_guard<std::mutex> lock(mutex_);
    mapped_[static_cast<const char*>(m)] = {bytes, (rounded + page - 1) / page * page};
    return m;  // zero-filled by the kernel
  }
  void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (p == nullptr) {
    KOLO_THROW(ErrorCode::kInvalidArgument, "cpu alloc: cannot allocate ", bytes, " bytes");
  }
  std::memset(p, 0, rounded);
  return p;
}

void CpuBackend::free(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = mapped_.find(static_cast<const char*>(ptr));
    if (it != mapped_.end()) {
      ::munmap(ptr, it->second.mapped);
      mapped_.erase(it);
      return;
    }
  }
  std::free(ptr);
}

void CpuBackend::discard(void* ptr, size_t bytes) {
  if (bytes == 0) return;
  char* begin = static_cast<char*>(ptr);
  char* end = begin + bytes;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  char* first =
      reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page);
  char* last = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(end) / page * page);
  bool mapped = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = mapped_.upper_bound(begin);
    if (it != mapped_.begin()) {
      --it;
      const char* start = it->first;
      mapped = end <= start + it->second.mapped;
      // Up to the buffer's end: the rest of its last page is nobody's, so the page goes too.
      if (end >= start + it->second.bytes && mapped)
        last = const_cast<char*>(start) + it->second.mapped;
    }
  }
  if (!mapped || first >= last) {
    std::memset(begin, 0, bytes);
    return;
  }
  // Whole pages: dropped (an anonymous private page reads as zero afterwards); the partial
  // pages at either end are zeroed in place.
  std::memset(begin, 0, static_cast<size_t>(first - begin));
  if (last < end) std::memset(last, 0, static_cast<size_t>(end - last));
  if (::madvise(first, static_cast<size_t>(last - first), MADV_DONTNEED) != 0)
    std::memset(first, 0, static_cast<size_t>(last - first));
}

void CpuBackend::zero(void* ptr, size_t bytes) {
  parallel_for(bytes, size_t{1} << 20, [&](size_t begin, size_t end) {
    std::memset(static_cast<char*>(ptr) + begin, 0, end - begin);
  });
}

void CpuBackend::copy_from_host(void* dst, const void* host_src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, host_src, bytes);
}

void CpuBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, src, bytes);
}

void CpuBackend::convert(void* dst, DType dst_dt, const void* src, DType src_dt, size_t n,
                         float scale) {
  // Host memory, so the one conversion module does it (vectorised, same rounding as the codecs
  // of vec.h); the dispatch only refuses what is not a storage dtype.
  dispatch(dst_dt, "convert (destination)", [](auto) {});
  dispatch(src_dt, "convert (source)", [](auto) {});
  const size_t dst_size = dtype_size(dst_dt), src_size = dtype_size(src_dt);
  parallel_for(n, 65536, [&](size_t begin, size_t end) {
    kolo::convert(static_cast<char*>(dst) + begin * dst_size, dst_dt,
                  static_cast<const char*>(src) + begin * src_size, src_dt, end - begin, scale);
  });
}

double CpuBackend::sum_squares(const void* x, size_t n, DType dt, bool* nonfinite) {
  KOLO_CHECK_ARG(nonfinite != nullptr, "sum_squares: nonfinite flag pointer is null");
  return dispatch(dt, "sum_squares", [&](auto s) {
    using S = decltype(s);
    return sum_squares_kernel<S>(as<S>(x), n, nonfinite);
  });
}

namespace cpu {
bool use_avx512() {
  static const bool yes = [] {
    const char* env = std::getenv("KOLO_TRAINER_ISA");
    std::string cap = env == nullptr ? "" : env;
    std::transform(cap.begin(), cap.end(), cap.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    KOLO_CHECK_ARG(cap.empty() || cap == "avx2" || cap == "avx512", "KOLO_TRAINER_ISA='", cap,
                   "' is not accepted (avx2, or avx512: the default, used where the CPU has it)");
    __builtin_cpu_init();
    return cap != "avx2" && __builtin_cpu_supports("avx512f");
  }();
  return yes;
}
}  // namespace cpu

Backend& cpu_backend() {
  // The kernels are compiled for AVX2 + FMA + F16C; refuse clearly rather than fault later.
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                                __builtin_cpu_supports("f16c");
  if (!supported) {
    KOLO_THROW(ErrorCode::kInvalidArgument,
               "cpu_backend: this CPU lacks AVX2, FMA or F16C, which the CPU kernels require");
  }
  use_avx512();  // a bad KOLO_TRAINER_ISA fails here, not in the middle of a step
  // OpenBLAS stays on the calling thread: the kernel pool splits large GEMMs (gemm.h).
  static CpuBackend backend = [] {
    choose_blas_kernels();
    openblas_set_num_threads(1);
    return CpuBackend();
  }();
  return backend;
}

}  // namespace kolo::trainer
