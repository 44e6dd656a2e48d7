// BERT embeddings: the forward sum against a direct reference and the backward scatter-add
// against finite differences (repeated tokens, null type ids, null gradients, accumulation).
#include <gtest/gtest.h>

#include "tests/trainer/kernels_test_util.h"
#include "trainer/kernels/backend.h"

namespace kolo::trainer {
namespace {

using testing::Tensor;

constexpr int kB = 2, kS = 3, kC = 7, kVocab = 5, kTypes = 2;
const std::vector<int32_t> kIds = {4, 1, 4, 0, 4, 1};  // token 4 three times
const std::vector<int32_t> kTypeIds = {0, 0, 1, 0, 1, 1};

std::vector<double> embed_ref(const std::vector<double>& word, const std::vector<double>& pos,
                              const std::vector<double>& type, const int32_t* type_ids) {
  std::vector<double> out(kB * kS * kC);
  for (int t = 0; t < kB * kS; ++t) {
    const int tid = type_ids == nullptr ? 0 : type_ids[t];
    for (int c = 0; c < kC; ++c) {
      out[t * kC + c] = word[kIds[t] * kC + c] + pos[(t % kS) * kC + c] + type[tid * kC + c];
    }
  }
  return out;
}

class KernelsEmbedding : public ::testing::TestWithParam<DType> {};

TEST_P(KernelsEmbedding, ForwardAndBackward) {
  const DType dt = GetParam();
  const double rtol = testing::storage_rtol(dt);
  const auto word = testing::random_values(kVocab * kC, 41, -1, 1, dt);
  const auto pos = testing::random_values(kS * kC, 42, -1, 1, dt);
  const auto type = testing::random_values(kTypes * kC, 43, -1, 1, dt);
  const auto dout = testing::random_values(kB * kS * kC, 44, -1, 1, dt);
  const auto wd = testing::to_double(word), pd = testing::to_double(pos),
             td = testing::to_double(type);
  Tensor tw(dt, word), tp(dt, pos), tt(dt, type), out(dt, kB * kS * kC), tdout(dt, dout);
  for (const int32_t* type_ids : {kTypeIds.data(), static_cast<const int32_t*>(nullptr)}) {
    cpu_backend().embed_forward(out.data(), kIds.data(), type_ids, tw.data(), tp.data(), tt.data(),
                                kB, kS, kC, dt);
    testing::expect_close(out.values(), embed_ref(wd, pd, td, type_ids), 1e-6, rtol, "out");

    auto loss = [&](const auto& w, const auto& p, const auto& y) {
      return testing::dot(embed_ref(w, p, y, type_ids), dout);
    };
    auto gw = testing::finite_difference([&](const auto& v) { return loss(v, pd, td); }, wd);
    const auto gp = testing::finite_difference([&](const auto& v) { return loss(wd, v, td); }, pd);
    const auto gt = testing::finite_difference([&](const auto& v) { return loss(wd, pd, v); }, td);
    // dword starts at 1 (accumulation); dtype_emb is not trained (null).
    Tensor dw(dt, std::vector<float>(kVocab * kC, 1.0f)), dp(dt, kS * kC), dty(dt, kTypes * kC);
    cpu_backend().embed_backward(dw.data(), dp.data(), nullptr, tdout.data(), kIds.data(), type_ids,
                                 kB, kS, kC, dt);
    for (auto& g : gw) g += 1.0;
    testing::expect_close(dw.values(), gw, 1e-5, rtol, "dword");
    testing::expect_close(dp.values(), gp, 1e-5, rtol, "dpos");
    cpu_backend().embed_backward(nullptr, nullptr, dty.data(), tdout.data(), kIds.data(), type_ids,
                                 kB, kS, kC, dt);
    testing::expect_close(dty.values(), gt, 1e-5, rtol, "dtype");
  }
}

TEST(KernelsEmbedding, RejectsNegativeIds) {
  Tensor t(DType::kFloat32, 64);
  const std::vector<int32_t> ids = {0, -1};
  EXPECT_THROW(cpu_backend().embed_forward(t.data(), ids.data(), nullptr, t.data(), t.data(),
                                           t.data(), 1, 2, 2, DType::kFloat32),
               Error);
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelsEmbedding, ::testing::ValuesIn(testing::kStorageDTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace kolo::trainer
