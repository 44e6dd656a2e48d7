// The argument checks every Backend implementation makes where a kernel is called, with the
// same messages on every backend (the kernel's name first). Each throws kolo::Error
// (kInvalidArgument) naming the bad value.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kolo::trainer {

void check_linear(const char* kernel, int T, int K, int N);
void check_layernorm(const char* kernel, int T, int C);
void check_embed(const char* kernel, const int32_t* ids, int B, int S, int C);
// Returns id when it is >= 0 (`what` names it: "token id", "type id").
int32_t check_id(const char* kernel, const char* what, int32_t id, size_t token);
void check_dropout_p(const char* kernel, float p);
void check_attention(const char* kernel, int B, int S, int C, int NH, float p);
void check_cross_entropy(const char* kernel, int N, int V);
// The number of rows whose target is not ignore_index, checked before any row is touched: null
// targets (N > 0) and a target outside [0, V) that is not ignore_index are errors naming the
// kernel and the row. Targets are host memory on every backend.
int counted_rows(const char* kernel, const int32_t* targets, int N, int V, int ignore_index);

}  // namespace kolo::trainer
