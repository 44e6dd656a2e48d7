// Internal to the CPU kernels: the one row-major sgemm entry point shared by the linear and
// attention kernels, C = alpha op(A) op(B) + beta C with leading dimensions. OpenBLAS runs
// single-threaded; a large product is split into row blocks of C across the
// kernel pool, so one set of threads does all the work (two pools taking turns on the same
// cores would each spin while the other computes).
#pragma once

namespace kolo::trainer::cpu {

// Before any BLAS call (cpu_backend() makes it first): when OpenBLAS chose kernels without AVX2
// on a CPU that has AVX2 and FMA (an unknown CPU model) and OPENBLAS_CORETYPE is unset, it
// chooses again: SkylakeX's kernels with AVX-512, else Haswell's (blas_core.cc).
void choose_blas_kernels();
// The kernels OpenBLAS runs ("Haswell", "SkylakeX", ...: its openblas_get_corename()).
const char* blas_kernels();

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc);

}  // namespace kolo::trainer::cpu
