// Job::require_same_settings over two thread ranks: the same settings pass (numbers compared by
// value), and a difference throws kMismatch on every rank naming the key and both values.
#include "trainer/dist/job.h"

#include <gtest/gtest.h>

#include <string>

#include "comm/base/error.h"
#include "tests/unit/thread_ranks.h"

namespace {

using kolo::Communicator;
using kolo::TransportKind;
using kolo::testing::borrowed;
using kolo::testing::run_thread_ranks;
using kolo::trainer::Job;
using nlohmann::json;

// Each rank's outcome of require_same_settings(settings(rank)): "" or the error's text.
template <typename Settings>
std::vector<std::string> compare(Settings settings) {
  return run_thread_ranks(3, TransportKind::kShm, [&](Communicator& c) {
    const Job job = Job::over(borrowed(c));
    try {
      job.require_same_settings(settings(c.rank()));
    } catch (const kolo::Error& e) {
      EXPECT_EQ(e.code(), kolo::ErrorCode::kMismatch);
      return std::string(e.what());
    }
    return std::string();
  });
}

TEST(JobSettings, TheSameSettingsPassWithNumbersComparedByValue) {
  for (const std::string& m : compare([](int rank) {
         return json{{"config",
                      {{"train_batch_size", rank == 1 ? json(32.0) : json(32)},
                       {"optimizer", {{"type", "AdamW"}}}}},
                     {"keep", 2}};
       }))
    EXPECT_EQ(m, "");
}

TEST(JobSettings, ADifferenceFailsEveryRankNamingTheKeyAndValues) {
  for (const std::string& m : compare([](int rank) {
         return json{{"config", {{"optimizer", {{"type", rank == 2 ? "SGD" : "AdamW"}}}}}};
       }))
    EXPECT_NE(m.find("rank 0 has config.optimizer.type = \"AdamW\", rank 2 has \"SGD\""),
              std::string::npos)
        << m;
  for (const std::string& m : compare([](int rank) {
         return rank == 1 ? json{{"resume", true}} : json{{"resume", true}, {"keep", 3}};
       }))
    EXPECT_NE(m.find("rank 0 has keep = 3, rank 1 has nothing"), std::string::npos) << m;
}

// What each rank loaded (train_bert and train_mnist summarise it after loading): ranks with
// other files trained on other data, ran other step counts and deadlocked at the end.
TEST(JobSettings, DataThatDifferFailEveryRankNamingTheCount) {
  const auto outcomes = run_thread_ranks(2, TransportKind::kShm, [&](Communicator& c) {
    const Job job = Job::over(borrowed(c));
    try {
      job.require_same_data({{"test_mails", c.rank() == 0 ? 1209 : 1207}});
    } catch (const kolo::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  });
  for (const std::string& m : outcomes)
    EXPECT_NE(m.find("the data differ between ranks: rank 0 has test_mails = 1209, rank 1 has "
                     "1207 (every rank must load the same data set"),
              std::string::npos)
        << m;
}

}  // namespace
