#include "trainer/kernels/checks.h"

#include "comm/base/error.h"

namespace kolo::trainer {

void check_linear(const char* kernel, int T, int K, int N) {
  KOLO_CHECK_ARG(T >= 0 && K >= 1 && N >= 1, kernel,
                 ": sizes must be T >= 0, K >= 1, N >= 1; got T=", T, " K=", K, " N=", N);
}

void check_layernorm(const char* kernel, int T, int C) {
  KOLO_CHECK_ARG(T >= 0 && C >= 1, kernel, ": sizes must be T >= 0, C >= 1; got T=", T, " C=", C);
}

void check_embed(const char* kernel, const int32_t* ids, int B, int S, int C) {
  KOLO_CHECK_ARG(B >= 0 && S >= 0 && C >= 1, kernel,
                 ": sizes must be B >= 0, S >= 0, C >= 1; got B=", B, " S=", S, " C=", C);
  KOLO_CHECK_ARG(ids != nullptr || B * S == 0, kernel, ": ids is null");
}

int32_t check_id(const char* kernel, const char* what, int32_t id, size_t token) {
  KOLO_CHECK_ARG(id >= 0, kernel, ": ", what, " at token ", token, " is ", id, " (must be >= 0)");
  return id;
}

void check_dropout_p(const char* kernel, float p) {
  KOLO_CHECK_ARG(p >= 0.0f && p < 1.0f, kernel, ": dropout probability must be in [0, 1), got ", p);
}

void check_attention(const char* kernel, int B, int S, int C, int NH, float p) {
  KOLO_CHECK_ARG(B >= 0 && S >= 1 && NH >= 1 && C >= NH && C % NH == 0, kernel,
                 ": sizes must be B >= 0, S >= 1, NH >= 1 and C a multiple of NH; got B=", B,
                 " S=", S, " C=", C, " NH=", NH);
  check_dropout_p(kernel, p);
}

void check_cross_entropy(const char* kernel, int N, int V) {
  KOLO_CHECK_ARG(N >= 0 && V >= 1, kernel, ": sizes must be N >= 0, V >= 1; got N=", N, " V=", V);
}

int counted_rows(const char* kernel, const int32_t* targets, int N, int V, int ignore_index) {
  KOLO_CHECK_ARG(targets != nullptr || N == 0, kernel, ": targets is null");
  int counted = 0;
  for (int n = 0; n < N; ++n) {
    const int32_t t = targets[n];
    if (t == ignore_index) continue;
    KOLO_CHECK_ARG(t >= 0 && t < V, kernel, ": target ", t, " of row ", n, " is outside [0, ", V,
                   ") and is not ignore_index ", ignore_index);
    ++counted;
  }
  return counted;
}

}  // namespace kolo::trainer
