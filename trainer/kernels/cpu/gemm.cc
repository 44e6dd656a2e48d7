// Linear layers on OpenBLAS sgemm, with transposes expressed as flags, never as copies.
// fp16/bf16 operands are widened to fp32 scratch, multiplied, and rounded once on store;
// weight gradients accumulate in fp32 (dw widened, sgemm with beta = 1, rounded back).
#include <cblas.h>

#include <atomic>
#include <mutex>
#include <string>

#include "trainer/kernels/checks.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/kernels/cpu/gemm.h"
#include "trainer/kernels/cpu/vec.h"

namespace kolo::trainer {
namespace cpu {

namespace {

// Products smaller than this (M N K) run on one thread: the split would cost more than it saves.
constexpr double kSplitWork = 4.0 * 1024 * 1024;
// Row-block boundaries of the split: a multiple of OpenBLAS's register tile along the rows of
// C, so a block gives the bits the whole product gives (KernelsParallel tests). OpenBLAS's
// Haswell kernels (also its choice for AMD Zen, Zen 5 included) tile those rows by 24: a
// 64-row block changed the last bits there, 24, 48, 96 and 192 did not (every transpose,
// M 200-4096, N 136-256, K 136-4096). The other kernels seen (SkylakeX's among them, on an
// Intel Xeon with AVX-512) tile by a divisor of 64.
size_t split_grain() {
  static const size_t grain = [] {
    const std::string core = openblas_get_corename();
    return core == "Haswell" || core == "Zen" ? size_t{48} : size_t{64};
  }();
  return grain;
}

void blas(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

std::atomic<std::vector<GemmCall>*> gemm_log{nullptr};
std::mutex gemm_log_mutex;

}  // namespace

void record_gemms(std::vector<GemmCall>* log) {
  std::lock_guard<std::mutex> lock(gemm_log_mutex);
  gemm_log.store(log);
}

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) return;
  if (gemm_log.load(std::memory_order_relaxed) != nullptr) {
    std::lock_guard<std::mutex> lock(gemm_log_mutex);
    if (auto* log = gemm_log.load())
      log->push_back({trans_a, trans_b, M, N, K, lda, ldb, ldc, beta != 0});
  }
  if (pool_threads() == 1 || double(M) * N * K < kSplitWork) {
    blas(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  } else {
    // Rows [r0, r1) of C take rows r0.. of op(A): row r of A, or column r of a transposed A.
    // Never columns: a column block of OpenBLAS's product differs in the last bits from the
    // same columns of the whole (seen on AMD Zen 5), so a thin product runs whole.
    parallel_for(M, split_grain(), [&](size_t r0, size_t r1) {
      const float* a = trans_a ? A + r0 : A + r0 * lda;
      blas(trans_a, trans_b, int(r1 - r0), N, K, alpha, a, lda, B, ldb, beta, C + r0 * ldc, ldc);
    });
  }
}

namespace {

// y[T,N] = x . w^T + b. The bias is written first and the product added with beta = 1: a
// zero-beta sgemm would spend the same pass clearing y.
template <typename S>
void linear_forward_kernel(void* y, const void* x, const void* w, const void* b, int T, int K,
                           int N) {
  const size_t rows = static_cast<size_t>(T);
  const float* x32 = to_f32<S>(Slot::kA, as<S>(x), rows * K);
  const float* w32 = to_f32<S>(Slot::kB, as<S>(w), static_cast<size_t>(N) * K);
  float* y32 = S::kDType == DType::kFloat32 ? static_cast<float*>(y) : scratch(Slot::kC, rows * N);
  float beta = 0.0f;
  if (b != nullptr) {
    const float* b32 = to_f32<S>(Slot::kD, as<S>(b), N);
    parallel_for(rows, 64, [&](size_t first, size_t last) {
      for (size_t t = first; t < last; ++t) std::memcpy(y32 + t * N, b32, N * sizeof(float));
    });
    beta = 1.0f;
  }
  sgemm(false, true, T, N, K, 1.0f, x32, K, w32, K, beta, y32, N);
  if constexpr (S::kDType != DType::kFloat32) from_f32<S>(as<S>(y), y32, rows * N);
}

// db[N] += column sums of dy[T,N], in fp32 lanes, added to db once. The pool splits the
// columns, so every column is summed in row order at any thread count.
template <typename S>
void bias_backward(typename S::T* db, const float* dy, int T, int N) {
  parallel_for(N, 128, [&](size_t first, size_t last) {
    const size_t cols = last - first;
    float* acc = scratch(Slot::kE, cols);
    std::memset(acc, 0, cols * sizeof(float));
    for (int t = 0; t < T; ++t) {
      const float* row = dy + static_cast<size_t>(t) * N + first;
      for (size_t j = 0; j < cols; j += kLanes) {
        const size_t left = cols - j;
        store_n<F32>(acc + j, _mm256_add_ps(load_n<F32>(acc + j, left), load_n<F32>(row + j, left)),
                     left);
      }
    }
    for (size_t j = 0; j < cols; j += kLanes) {
      const size_t left = cols - j;
      store_n<S>(db + first + j,
                 _mm256_add_ps(load_n<S>(db + first + j, left), load_n<F32>(acc + j, left)), left);
    }
  });
}

template <typename S>
void linear_backward_kernel(void* dx, void* dw, void* db, const void* dy, const void* x,
                            const void* w, int T, int K, int N) {
  const size_t rows = static_cast<size_t>(T);
  const size_t wn = static_cast<size_t>(N) * K;
  const float* dy32 = to_f32<S>(Slot::kA, as<S>(dy), rows * N);
  if (dx != nullptr) {
    // dx[T,K] = dy[T,N] . w[N,K]
    const float* w32 = to_f32<S>(Slot::kB, as<S>(w), wn);
    float* dx32 =
        S::kDType == DType::kFloat32 ? static_cast<float*>(dx) : scratch(Slot::kC, rows * K);
    sgemm(false, false, T, K, N, 1.0f, dy32, N, w32, K, 0.0f, dx32, K);
    if constexpr (S::kDType != DType::kFloat32) from_f32<S>(as<S>(dx), dx32, rows * K);
  }
  if (dw != nullptr && T > 0) {
    // dw[N,K] += dy^T[N,T] . x[T,K]
    const float* x32 = to_f32<S>(Slot::kB, as<S>(x), rows * K);
    float* dw32 =
        S::kDType == DType::kFloat32 ? static_cast<float*>(dw) : widen<S>(Slot::kC, as<S>(dw), wn);
    sgemm(true, false, N, K, T, 1.0f, dy32, N, x32, K, 1.0f, dw32, K);
    if constexpr (S::kDType != DType::kFloat32) from_f32<S>(as<S>(dw), dw32, wn);
  }
  if (db != nullptr) bias_backward<S>(as<S>(db), dy32, T, N);
}

}  // namespace
}  // namespace cpu

using namespace cpu;

void CpuBackend::linear_forward(void* y, const void* x, const void* w, const void* b, int T, int K,
                                int N, DType dt) {
  check_linear("linear_forward", T, K, N);
  dispatch(dt, "linear_forward",
           [&](auto s) { linear_forward_kernel<decltype(s)>(y, x, w, b, T, K, N); });
}

void CpuBackend::linear_backward(void* dx, void* dw, void* db, const void* dy, const void* x,
                                 const void* w, int T, int K, int N, DType dt) {
  check_linear("linear_backward", T, K, N);
  dispatch(dt, "linear_backward",
           [&](auto s) { linear_backward_kernel<decltype(s)>(dx, dw, db, dy, x, w, T, K, N); });
}

}  // namespace kolo::trainer
