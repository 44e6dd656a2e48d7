// BERT input embeddings: word + position + token type, and the backward scatter-add. The ids
// are host memory (backend.h): they are checked there, and for the backward the tokens are
// grouped by row on the host (sorted by id, token order kept), so each gradient row is summed
// in fp32 and rounded once: no atomics, the same bits on every run. A row with few tokens is
// summed in token order by one block, as the CPU backend does; a row with many (the token type
// rows, a padding id) is split over the warps of a block per 32 columns, whose sums are then
// added in warp order, since one block per row would leave most of the GPU idle.
#include <algorithm>
#include <utility>
#include <vector>

#include "trainer/kernels/checks.h"
#include "trainer/kernels/cuda/common.cuh"

namespace kolo::trainer {
namespace cuda {
namespace {

void check_ids(const char* kernel, const char* what, const int32_t* ids, size_t n) {
  for (size_t t = 0; ids != nullptr && t < n; ++t) check_id(kernel, what, ids[t], t);
}

template <typename T>
__global__ void embed_forward_kernel(T* out, const int32_t* ids, const int32_t* type_ids,
                                     const T* word, const T* pos, const T* type, size_t tokens,
                                     int S, int C) {
  for (size_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const T* w = word + size_t(ids[t]) * C;
    const T* p = pos + (t % S) * C;
    const T* y = type + size_t(type_ids == nullptr ? 0 : type_ids[t]) * C;
    for (int j = threadIdx.x; j < C; j += blockDim.x)
      out[t * C + j] = from_float<T>(to_float(w[j]) + to_float(p[j]) + to_float(y[j]));
  }
}

constexpr int kSmallGroup = 32;  // groups of more tokens go to scatter_add_large_kernel
constexpr int kLargeWarps = 32;  // the warps that kernel splits a group's tokens over

// Group g covers sorted positions [starts[g], starts[g + 1]) of `tokens`, all with row rows[g]:
// grad[rows[g]] += sum of dout[tokens[i]] in that order (groups of at most kSmallGroup).
template <typename T>
__global__ void scatter_add_kernel(T* grad, const T* dout, const int32_t* rows,
                                   const int32_t* starts, const int32_t* tokens, int groups,
                                   int C) {
  for (int g = blockIdx.x; g < groups; g += gridDim.x) {
    if (starts[g + 1] - starts[g] > kSmallGroup) continue;
    T* out = grad + size_t(rows[g]) * C;
    for (int j = threadIdx.x; j < C; j += blockDim.x) {
      float acc = 0.0f;
      for (int i = starts[g]; i < starts[g + 1]; ++i)
        acc += to_float(dout[size_t(tokens[i]) * C + j]);
      out[j] = from_float<T>(to_float(out[j]) + acc);
    }
  }
}

// Block (x, y): group large[x], columns [32 y, 32 y + 32); warp w sums the group's tokens
// w, w + kLargeWarps, ...; the warps' sums are added in warp order.
template <typename T>
__global__ void scatter_add_large_kernel(T* grad, const T* dout, const int32_t* rows,
                                         const int32_t* starts, const int32_t* tokens,
                                         const int32_t* large, int C) {
  __shared__ float partial[kLargeWarps][33];
  const int g = large[blockIdx.x];
  const int j = blockIdx.y * 32 + threadIdx.x;
  float acc = 0.0f;
  if (j < C) {
    for (int i = starts[g] + threadIdx.y; i < starts[g + 1]; i += kLargeWarps)
      acc += to_float(dout[size_t(tokens[i]) * C + j]);
  }
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && j < C) {
    float sum = 0.0f;
    for (int w = 0; w < kLargeWarps; ++w) sum += partial[w][threadIdx.x];
    T* out = grad + size_t(rows[g]) * C + j;
    *out = from_float<T>(to_float(*out) + sum);
  }
}

// grad[key(t)] += dout[t] for every token t.
template <typename Key>
void scatter_add(CudaBackend& be, void* grad, const void* dout, size_t tokens, int C, DType dt,
                 Key key) {
  std::vector<std::pair<int32_t, int32_t>> order(tokens);
  for (size_t t = 0; t < tokens; ++t) order[t] = {key(t), static_cast<int32_t>(t)};
  std::sort(order.begin(), order.end());
  // One upload: rows of the groups, their starts (one more), the sorted tokens, then the
  // groups of more than kSmallGroup tokens.
  std::vector<int32_t> table;
  table.reserve(4 * tokens + 1);
  for (size_t t = 0; t < tokens; ++t)
    if (t == 0 || order[t].first != order[t - 1].first) table.push_back(order[t].first);
  const int groups = static_cast<int>(table.size());
  for (size_t t = 0; t < tokens; ++t)
    if (t == 0 || order[t].first != order[t - 1].first) table.push_back(static_cast<int32_t>(t));
  table.push_back(static_cast<int32_t>(tokens));
  for (const auto& entry : order) table.push_back(entry.second);
  const size_t large_at = table.size();
  for (int g = 0; g < groups; ++g)
    if (table[groups + g + 1] - table[groups + g] > kSmallGroup) table.push_back(g);
  const auto large = static_cast<unsigned>(table.size() - large_at);
  const int32_t* dev = be.upload(Slot::kInts2, table.data(), table.size());
  dispatch(dt, "embed_backward", [&](auto tag) {
    using T = decltype(tag);
    const int32_t *starts = dev + groups, *sorted = dev + 2 * groups + 1;
    scatter_add_kernel<T><<<blocks_for(size_t(groups), 1), kThreads, 0, be.stream()>>>(
        static_cast<T*>(grad), static_cast<const T*>(dout), dev, starts, sorted, groups, C);
    if (large > 0) {
      scatter_add_large_kernel<T>
          <<<dim3(large, unsigned((C + 31) / 32)), dim3(32, kLargeWarps), 0, be.stream()>>>(
              static_cast<T*>(grad), static_cast<const T*>(dout), dev, starts, sorted,
              dev + large_at, C);
    }
  });
  check(cudaGetLastError(), "embed_backward launch");
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::embed_forward(void* out, const int32_t* ids, const int32_t* type_ids,
                                const void* word, const void* pos, const void* type, int B, int S,
                                int C, DType dt) {
  check_embed("embed_forward", ids, B, S, C);
  const size_t tokens = size_t(B) * S;
  if (tokens == 0) return;
  check_ids("embed_forward", "token id", ids, tokens);
  check_ids("embed_forward", "type id", type_ids, tokens);
  const int32_t* ids_dev = upload(Slot::kInts0, ids, tokens);
  const int32_t* types_dev = upload(Slot::kInts1, type_ids, tokens);
  dispatch(dt, "embed_forward", [&](auto tag) {
    using T = decltype(tag);
    embed_forward_kernel<T><<<blocks_for(tokens, 1), kThreads, 0, stream()>>>(
        static_cast<T*>(out), ids_dev, types_dev, static_cast<const T*>(word),
        static_cast<const T*>(pos), static_cast<const T*>(type), tokens, S, C);
  });
  check(cudaGetLastError(), "embed_forward launch");
}

void CudaBackend::embed_backward(void* dword, void* dpos, void* dtype_emb, const void* dout,
                                 const int32_t* ids, const int32_t* type_ids, int B, int S, int C,
                                 DType dt) {
  check_embed("embed_backward", ids, B, S, C);
  const size_t tokens = size_t(B) * S;
  dispatch(dt, "embed_backward", [](auto) {});
  if (tokens == 0) return;
  check_ids("embed_backward", "token id", ids, tokens);
  check_ids("embed_backward", "type id", type_ids, tokens);
  if (dword != nullptr)
    scatter_add(*this, dword, dout, tokens, C, dt, [&](size_t t) { return ids[t]; });
  if (dpos != nullptr) {
    scatter_add(*this, dpos, dout, tokens, C, dt, [&](size_t t) { return int32_t(t % S); });
  }
  if (dtype_emb != nullptr) {
    scatter_add(*this, dtype_emb, dout, tokens, C, dt,
                [&](size_t t) { return type_ids == nullptr ? 0 : type_ids[t]; });
  }
}

}  // namespace kolo::trainer
