// Internal to the CPU kernels: the one row-major sgemm entry point shared by the linear and
// attention kernels, C = alpha op(A) op(B) + beta C with leading dimensions. OpenBLAS runs
// single-threaded; a large product is split into row blocks of C across the
// kernel pool, so one set of threads does all the work (two pools taking turns on the same
// cores would each spin while the other computes).
#pragma once

namespace kolo::trainer::cpu {

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc);

}  // namespace kolo::trainer::cpu
