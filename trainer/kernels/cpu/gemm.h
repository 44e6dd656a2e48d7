// Internal to the CPU kernels: the one row-major sgemm entry point shared by the linear and
// attention kernels, C = alpha op(A) op(B) + beta C with leading dimensions. OpenBLAS runs
// single-threaded; a large product is split into row blocks of C across the
// kernel pool, so one set of threads does all the work (two pools taking turns on the same
// cores would each spin while the other computes).
#pragma once

#include <vector>

namespace kolo::trainer::cpu {

// Before any BLAS call (cpu_backend() makes it first): when OpenBLAS chose kernels without AVX2
// on a CPU that has AVX2 and FMA (an unknown CPU model) and OPENBLAS_CORETYPE is unset, it
// chooses again: SkylakeX's kernels with AVX-512, else Haswell's (blas_core.cc).
void choose_blas_kernels();
// The kernels OpenBLAS runs ("Haswell", "SkylakeX", ...: its openblas_get_corename()).
const char* blas_kernels();

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc);

// One sgemm call's shape, as recorded for a replay (benchmarks/trainer_throughput times a
// step's products alone: the ceiling its kernels' GEMMs set).
struct GemmCall {
  bool trans_a, trans_b;
  int M, N, K, lda, ldb, ldc;
  bool accumulate;  // beta != 0
};
// While `log` is set, every sgemm call (from any thread) appends its shape to it; null stops.
void record_gemms(std::vector<GemmCall>* log);

}  // namespace kolo::trainer::cpu
