// Metrics against hand-made expectations: a confusion matrix counted by hand, masked-LM token
// accuracy, argmax, running means, throughput over an injected clock, and the progress text.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "comm/base/convert.h"
#include "comm/base/error.h"
#include "trainer/metrics/classification.h"
#include "trainer/metrics/meters.h"
#include "trainer/metrics/progress.h"

namespace kolo::trainer {
namespace {

TEST(ConfusionMatrix, BinaryByHand) {
  // 10 samples: TP 3, FN 1, FP 2, TN 4.
  const std::vector<int32_t> labels = {1, 1, 1, 1, 0, 0, 0, 0, 0, 0};
  const std::vector<int32_t> preds = {1, 1, 1, 0, 1, 1, 0, 0, 0, 0};
  ConfusionMatrix m(2);
  m.add(labels.data(), preds.data(), labels.size());
  EXPECT_EQ(m.count(1, 1), 3);
  EXPECT_EQ(m.count(1, 0), 1);
  EXPECT_EQ(m.count(0, 1), 2);
  EXPECT_EQ(m.count(0, 0), 4);
  EXPECT_DOUBLE_EQ(m.accuracy(), 0.7);
  EXPECT_DOUBLE_EQ(m.precision(), 3.0 / 5);
  EXPECT_DOUBLE_EQ(m.recall(), 3.0 / 4);
  EXPECT_DOUBLE_EQ(m.f1(), 2 * 0.6 * 0.75 / (0.6 + 0.75));
  EXPECT_DOUBLE_EQ(m.precision(0), 4.0 / 5);  // the negative class as positive
  EXPECT_DOUBLE_EQ(m.recall(0), 4.0 / 6);
}

TEST(ConfusionMatrix, MulticlassMergeAndEmpty) {
  ConfusionMatrix a(3), b(3);
  EXPECT_EQ(a.accuracy(), 0.0);
  EXPECT_EQ(a.f1(), 0.0);  // no positives at all: zero_division = 0
  a.add(2, 2);
  a.add(2, 1);
  b.add(1, 1);
  b.add(0, 2);
  a.merge(b);
  EXPECT_EQ(a.total(), 4);
  EXPECT_DOUBLE_EQ(a.accuracy(), 0.5);
  EXPECT_DOUBLE_EQ(a.precision(2), 0.5);  // predicted 2: (2,2) right, (0,2) wrong
  EXPECT_DOUBLE_EQ(a.recall(2), 0.5);     // true 2: (2,2) right, (2,1) wrong
  EXPECT_THROW(a.add(3, 0), Error);
  EXPECT_THROW(a.merge(ConfusionMatrix(2)), Error);
  a.reset();
  EXPECT_EQ(a.total(), 0);
}

TEST(TokenAccuracy, IgnoresUnlabelledPositions) {
  const std::vector<int32_t> labels = {-100, 5, -100, 7, 9};
  const std::vector<int32_t> preds = {5, 5, 1, 8, 9};
  TokenAccuracy acc;
  acc.add(labels.data(), preds.data(), labels.size());
  EXPECT_EQ(acc.counted(), 3);
  EXPECT_EQ(acc.correct(), 2);
  EXPECT_DOUBLE_EQ(acc.accuracy(), 2.0 / 3);
}

TEST(Meters, Means) {
  RunningMean m;
  m.add(2.0, 1);
  m.add(4.0, 3);
  EXPECT_DOUBLE_EQ(m.mean(), 3.5);
  m.reset();
  EXPECT_EQ(m.mean(), 0.0);
  ExponentialMean e(0.5);
  e.add(4.0);
  EXPECT_DOUBLE_EQ(e.value(), 4.0);  // bias-corrected: the first value itself
  e.add(2.0);
  EXPECT_DOUBLE_EQ(e.value(), (0.25 * 4 + 0.5 * 2) / 0.75);
}

TEST(Meters, ThroughputOnInjectedClock) {
  double now = 100.0;
  ThroughputMeter t([&] { return now; });
  t.add(500);
  now = 102.0;
  EXPECT_DOUBLE_EQ(t.rate(), 250.0);
  t.add(30);
  now = 105.0;
  EXPECT_DOUBLE_EQ(t.rate(), 10.0);
  EXPECT_DOUBLE_EQ(t.rate(), 0.0);  // no time passed
  EXPECT_DOUBLE_EQ(t.total_units(), 530.0);
}

TEST(Progress, FormatsFields) {
  ProgressLine line;
  line.step = 450;
  line.total_steps = 1000;
  line.loss = 2.34514;
  line.loss_scale = 65536;
  line.lr = 3e-4;
  line.rate = 12345.64;
  line.extras = {{"acc", "0.91"}};
  EXPECT_EQ(format_progress(line, "tokens/s"),
            "step 450/1000 | loss 2.3451 | scale 65536 | lr 3.000e-04 | tokens/s 12345.6 | "
            "acc=0.91");
  EXPECT_EQ(format_bar(5, 10, 10), "[=====>    ]  50%");
  EXPECT_EQ(format_bar(10, 10, 4), "[====] 100%");
  EXPECT_EQ(format_bar(0, 10, 4), "[>   ]   0%");
}

std::string printed(int tty) {
  std::FILE* f = std::tmpfile();
  {
    ProgressPrinter p(ProgressOptions{f, tty, "samples/s", 4});
    ProgressLine line;
    line.step = 1;
    line.total_steps = 2;
    p.report(line);
    line.step = 2;
    p.report(line);
    p.message("eval done");
  }
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
  std::fclose(f);
  return s;
}

TEST(Progress, PlainLinesOffTerminal) {
  const std::string s = printed(0);
  EXPECT_EQ(s.find('\r'), std::string::npos);
  EXPECT_NE(s.find("step 1/2 | loss 0.0000 | scale 1 | lr 0.000e+00 | samples/s 0.0\n"),
            std::string::npos);
  EXPECT_NE(s.find("step 2/2"), std::string::npos);
  EXPECT_EQ(s.substr(s.size() - 10), "eval done\n");
}

TEST(Progress, BarRedrawnOnTerminal) {
  const std::string s = printed(1);
  EXPECT_EQ(s.rfind("\r[==> ]  50% step 1/2", 0), 0u) << s;
  EXPECT_NE(s.find("\r[====] 100% step 2/2"), std::string::npos) << s;
  EXPECT_NE(s.find("\033[K\neval done\n"), std::string::npos) << s;  // bar line closed first
}

}  // namespace
}  // namespace kolo::trainer
