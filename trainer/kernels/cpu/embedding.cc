// BERT input embeddings: word + position + token type, and the backward scatter-add. Tokens
// are grouped by row (sorted by id) so each gradient row is summed in fp32 and rounded once,
// whatever the storage dtype and however often a token repeats. Tokens (forward) and rows
// (backward) are split across the kernel pool.
#include <algorithm>
#include <utility>
#include <vector>

#include "trainer/kernels/checks.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/kernels/cpu/parallel.h"
#include "trainer/kernels/cpu/vec.h"

namespace kolo::trainer {
namespace cpu {
namespace {

template <typename S>
void embed_forward_kernel(typename S::T* out, const int32_t* ids, const int32_t* type_ids,
                          const typename S::T* word, const typename S::T* pos,
                          const typename S::T* type, int B, int S_len, int C) {
  const size_t c = C;
  parallel_for(static_cast<size_t>(B) * S_len, 64, [&](size_t first, size_t last) {
    for (size_t t = first; t < last; ++t) {
      const auto* w = word + check_id("embed_forward", "token id", ids[t], t) * c;
      const auto* p = pos + (t % S_len) * c;
      const int32_t tid =
          type_ids == nullptr ? 0 : check_id("embed_forward", "type id", type_ids[t], t);
      const auto* y = type + tid * c;
      auto* o = out + t * c;
      for (size_t j = 0; j < c; j += kLanes) {
        const size_t left = c - j;
        const __m256 v = _mm256_add_ps(
            _mm256_add_ps(load_n<S>(w + j, left), load_n<S>(p + j, left)), load_n<S>(y + j, left));
        store_n<S>(o + j, v, left);
      }
    }
  });
}

// grad[key(t)] += dout[t] for every token t: tokens sorted by key, each key's rows summed in
// fp32 scratch, then added to its gradient row once.
template <typename S, typename Key>
void scatter_add(typename S::T* grad, const typename S::T* dout, size_t tokens, int C, Key key) {
  thread_local std::vector<std::pair<int32_t, uint32_t>> order;
  order.resize(tokens);
  for (size_t t = 0; t < tokens; ++t) order[t] = {key(t), static_cast<uint32_t>(t)};
  std::sort(order.begin(), order.end());
  // starts[g]: the first token of the g-th distinct key; the groups write disjoint rows.
  thread_local std::vector<size_t> starts;
  starts.clear();
  for (size_t t = 0; t < tokens; ++t) {
    if (t == 0 || order[t].first != order[t - 1].first) starts.push_back(t);
  }
  starts.push_back(tokens);
  const size_t c = C;
  const auto& sorted = order;
  const auto& bounds = starts;
  parallel_for(bounds.size() - 1, 16, [&](size_t first_group, size_t last_group) {
    float* acc = scratch(Slot::kA, c);
    for (size_t group = first_group; group < last_group; ++group) {
      const int32_t id = sorted[bounds[group]].first;
      std::memset(acc, 0, c * sizeof(float));
      for (size_t t = bounds[group]; t < bounds[group + 1]; ++t) {
        const auto* row = dout + sorted[t].second * c;
        for (size_t j = 0; j < c; j += kLanes) {
          const size_t left = c - j;
          store_n<F32>(acc + j, _mm256_add_ps(load_n<F32>(acc + j, left), load_n<S>(row + j, left)),
                       left);
        }
      }
      auto* g = grad + id * c;
      for (size_t j = 0; j < c; j += kLanes) {
        const size_t left = c - j;
        store_n<S>(g + j, _mm256_add_ps(load_n<S>(g + j, left), load_n<F32>(acc + j, left)), left);
      }
    }
  });
}

}  // namespace
}  // namespace cpu

using namespace cpu;

void CpuBackend::embed_forward(void* out, const int32_t* ids, const int32_t* type_ids,
                               const void* word, const void* pos, const void* type, int B, int S,
                               int C, DType dt) {
  check_embed("embed_forward", ids, B, S, C);
  dispatch(dt, "embed_forward", [&](auto s) {
    using St = decltype(s);
    embed_forward_kernel<St>(as<St>(out), ids, type_ids, as<St>(word), as<St>(pos), as<St>(type), B,
                             S, C);
  });
}

void CpuBackend::embed_backward(void* dword, void* dpos, void* dtype_emb, const void* dout,
                                const int32_t* ids, const int32_t* type_ids, int B, int S, int C,
                                DType dt) {
  check_embed("embed_backward", ids, B, S, C);
  const size_t tokens = static_cast<size_t>(B) * S;
  dispatch(dt, "embed_backward", [&](auto s) {
    using St = decltype(s);
    const auto* d = as<St>(dout);
    if (dword != nullptr) {
      scatter_add<St>(as<St>(dword), d, tokens, C,
                      [&](size_t t) { return check_id("embed_backward", "token id", ids[t], t); });
    }
    if (dpos != nullptr) {
      scatter_add<St>(as<St>(dpos), d, tokens, C,
                      [&](size_t t) { return static_cast<int32_t>(t % S); });
    }
    if (dtype_emb != nullptr) {
      scatter_add<St>(as<St>(dtype_emb), d, tokens, C, [&](size_t t) {
        return type_ids == nullptr ? 0 : check_id("embed_backward", "type id", type_ids[t], t);
      });
    }
  });
}

}  // namespace kolo::trainer
