// DataParallel's gradient predivide (DeepSpeed's gradient_predivide_factor and
// prescale_gradients) over two thread ranks: float16 gradients of 40000 on each rank sum to
// more than float16 holds, so the plain average (sum, then halve) is inf; divided by 2 first
// (or by the world size) the partial sums stay in range and the average is 40000 again. At
// every ZeRO stage, host path (stage 1's reduce-scatter included).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/base/convert.h"
#include "tests/unit/thread_ranks.h"
#include "trainer/config/train_config.h"
#include "trainer/dist/data_parallel.h"
#include "trainer/kernels/backend.h"
#include "trainer/model/mlp.h"

namespace {

using kolo::Communicator;
using kolo::DType;
using kolo::TransportKind;
using kolo::testing::borrowed;
using kolo::testing::run_thread_ranks;
using namespace kolo::trainer;

// Every rank's averaged gradient range after one step whose gradients are all `value`, with
// `factor` as the predivide (0: none set), as floats.
std::vector<std::vector<float>> averaged(int stage, float value, double factor) {
  return run_thread_ranks(2, TransportKind::kShm, [&](Communicator& c) {
    Mlp model(cpu_backend(), MlpConfig{{8, 16, 4}}, DType::kFloat16, 4);
    ZeroConfig zero;
    zero.stage = stage;
    DataParallel parallel(borrowed(c), model, zero);
    if (factor != 0) parallel.set_predivide(factor);
    parallel.begin_micro(true);
    std::vector<uint16_t> grads(model.layout().total(), kolo::float_to_half(value));
    cpu_backend().copy_from_host(model.grads(), grads.data(), grads.size() * 2);
    parallel.finish_reduction();
    const Partition& own = parallel.partition();
    const auto* out = static_cast<const uint16_t*>(parallel.grads().data);
    std::vector<float> result;
    for (size_t i = 0; i < own.end - own.begin; ++i) result.push_back(kolo::half_to_float(out[i]));
    return result;
  });
}

TEST(DataParallelPredivide, KeepsFloat16PartialSumsInRange) {
  for (int stage : {0, 1, 2, 3}) {
    const std::string at = "ZeRO stage " + std::to_string(stage);
    for (const auto& rank : averaged(stage, 40000.0f, 0)) {
      ASSERT_FALSE(rank.empty()) << at;
      EXPECT_TRUE(std::isinf(rank[0])) << at << ": the plain average of 40000 + 40000 in float16";
    }
    for (double factor : {2.0, 4.0}) {
      for (const auto& rank : averaged(stage, 40000.0f, factor))
        for (float v : rank) ASSERT_EQ(v, 40000.0f) << at << ", predivide " << factor;
    }
    // A factor that is not a power of two rounds on the way: 3 -> 13333.33 (float16 13336),
    // summed to 26672, times 3 / 2 = 40008.
    for (const auto& rank : averaged(stage, 40000.0f, 3.0))
      for (float v : rank) ASSERT_NEAR(v, 40000.0f, 40000.0f * 2e-3) << at << ", predivide 3";
  }
}

TEST(DataParallelPredivide, RefusesAFactorOutOfRange) {
  run_thread_ranks(1, TransportKind::kShm, [&](Communicator& c) {
    Mlp model(cpu_backend(), MlpConfig{{8, 4}}, DType::kFloat32, 2);
    DataParallel parallel(borrowed(c), model, ZeroConfig{});
    for (double bad : {0.0, -1.0, std::nan(""), double(INFINITY)})
      EXPECT_THROW(parallel.set_predivide(bad), kolo::Error) << bad;
    return 0;
  });
}

TEST(DataParallelPredivide, ConfigKeys) {
  const nlohmann::json base = {{"train_batch_size", 8}};
  EXPECT_EQ(parse_train_config(base, 4, false).gradient_predivide(), 1.0);
  nlohmann::json c = base;
  c["gradient_predivide_factor"] = 8.0;
  EXPECT_EQ(parse_train_config(c, 4, false).gradient_predivide(), 8.0);
  c["prescale_gradients"] = true;
  EXPECT_EQ(parse_train_config(c, 4, false).gradient_predivide(), 4.0);  // the world size
  c = base;
  c["gradient_predivide_factor"] = 0;
  try {
    parse_train_config(c, 4, false);
    FAIL() << "a zero factor was accepted";
  } catch (const kolo::Error& e) {
    EXPECT_NE(std::string(e.what()).find("gradient_predivide_factor"), std::string::npos)
        << e.what();
  }
}

}  // namespace
