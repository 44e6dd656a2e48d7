// MLM masking proportions (15% selected; 80/10/10), determinism, specials and padding never
// masked; token examples and batches (padding, attention mask, labels, seeded epochs).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "comm/base/error.h"
#include "tests/trainer/data_test_util.h"
#include "trainer/data/token_batches.h"

namespace kolo::trainer {
namespace {

const Vocab& vocab() {
  static const Vocab v = Vocab::load(testing::data_dir());
  return v;
}

// rows sequences of `seq`: [CLS], random regular tokens with an [UNK] and an [unused5] mixed
// in, [SEP], then padding over the last quarter of each row.
TokenBatch synthetic_batch(int rows, int seq, uint64_t seed) {
  Rng rng(seed);
  TokenBatch batch;
  batch.batch = rows;
  batch.seq = seq;
  const int real = seq - seq / 4;
  for (int r = 0; r < rows; ++r) {
    for (int t = 0; t < seq; ++t) {
      int32_t id = vocab().pad_id();
      if (t == 0)
        id = vocab().cls_id();
      else if (t == real - 1)
        id = vocab().sep_id();
      else if (t == 5)
        id = vocab().unk_id();
      else if (t == 6)
        id = vocab().find("[unused5]");
      else if (t < real)
        id = 999 + static_cast<int32_t>(rng.below(30522 - 999));
      batch.input_ids.push_back(id);
      batch.attention_mask.push_back(t < real ? 1 : 0);
      batch.token_type_ids.push_back(0);
    }
  }
  return batch;
}

TEST(DataMlm, ProportionsOverManyTokens) {
  const TokenBatch original = synthetic_batch(1000, 128, 1);
  TokenBatch batch = original;
  Rng rng(2);
  MlmMasker(vocab()).apply(batch, rng);
  ASSERT_EQ(batch.mlm_labels.size(), batch.input_ids.size());
  size_t eligible = 0, selected = 0, masked = 0, random = 0, kept = 0;
  for (size_t i = 0; i < batch.input_ids.size(); ++i) {
    const int32_t before = original.input_ids[i], after = batch.input_ids[i];
    const bool can = original.attention_mask[i] == 1 && before >= 999;
    eligible += can;
    if (batch.mlm_labels[i] == kIgnoreIndex) {
      EXPECT_EQ(after, before) << "unselected token changed at " << i;
      continue;
    }
    ASSERT_TRUE(can) << "special or padding selected at " << i << " (id " << before << ")";
    EXPECT_EQ(batch.mlm_labels[i], before);
    ++selected;
    if (after == vocab().mask_id()) {
      ++masked;
    } else if (after != before) {
      ++random;
      EXPECT_GE(after, 999);
      EXPECT_LT(after, 30522);
    } else {
      ++kept;
    }
  }
  ASSERT_EQ(eligible, 1000u * (96 - 4));  // 96 real per row, less [CLS] [SEP] [UNK] [unused5]
  // Binomial standard deviations: 0.0012 for the 15%, 0.003 / 0.0022 for 80% / 10%.
  EXPECT_NEAR(static_cast<double>(selected) / eligible, 0.15, 0.006);
  EXPECT_NEAR(static_cast<double>(masked) / selected, 0.8, 0.015);
  EXPECT_NEAR(static_cast<double>(random) / selected, 0.1, 0.011);
  EXPECT_NEAR(static_cast<double>(kept) / selected, 0.1, 0.011);
}

TEST(DataMlm, SeededAndDeterministic) {
  const MlmMasker masker(vocab());
  TokenBatch a = synthetic_batch(8, 64, 3), b = a, c = a;
  Rng ra(10), rb(10), rc(11);
  masker.apply(a, ra);
  masker.apply(b, rb);
  masker.apply(c, rc);
  EXPECT_EQ(a.input_ids, b.input_ids);
  EXPECT_EQ(a.mlm_labels, b.mlm_labels);
  EXPECT_NE(a.mlm_labels, c.mlm_labels);
}

std::vector<Mail> mails_of_lengths(const std::vector<size_t>& lengths) {
  std::vector<Mail> mails;
  for (size_t m = 0; m < lengths.size(); ++m) {
    Mail mail;
    mail.label = static_cast<int32_t>(m % 2);
    for (size_t t = 0; t < lengths[m]; ++t) mail.tokens.push_back(2000 + static_cast<int32_t>(t));
    mails.push_back(mail);
  }
  return mails;
}

TEST(DataTokenBatches, ExamplesFromMails) {
  const std::vector<Mail> mails = mails_of_lengths({3, 20, 0});
  const auto cls = classification_examples(mails, vocab(), 8);
  ASSERT_EQ(cls.size(), 3u);
  EXPECT_EQ(cls[0].ids, (std::vector<int32_t>{101, 2000, 2001, 2002, 102}));
  EXPECT_EQ(cls[1].ids, (std::vector<int32_t>{101, 2000, 2001, 2002, 2003, 2004, 2005, 102}));
  EXPECT_EQ(cls[1].label, 1);
  EXPECT_EQ(cls[2].ids, (std::vector<int32_t>{101, 102}));
  // Windows of 6: mail 0 -> 1 (short first window kept), mail 1 (20) -> 6+6+6, the last 2
  // dropped (under half a window), mail 2 (empty) -> none.
  const auto mlm = mlm_examples(mails, vocab(), 8);
  ASSERT_EQ(mlm.size(), 4u);
  EXPECT_EQ(mlm[3].ids, (std::vector<int32_t>{101, 2012, 2013, 2014, 2015, 2016, 2017, 102}));
  EXPECT_EQ(mlm_examples(mails, vocab(), 8, 2).size(), 3u);
}

TEST(DataTokenBatches, PaddingMaskAndLabels) {
  const auto examples = classification_examples(mails_of_lengths({3, 1, 5}), vocab(), 16);
  const std::vector<size_t> order = {2, 0};
  const TokenBatch fixed = make_token_batch(examples, order, vocab().pad_id(), 16, false, true);
  EXPECT_EQ(fixed.batch, 2);
  EXPECT_EQ(fixed.seq, 16);
  EXPECT_EQ(fixed.labels, (std::vector<int32_t>{0, 0}));
  EXPECT_TRUE(fixed.mlm_labels.empty());
  const TokenBatch tight = make_token_batch(examples, order, vocab().pad_id(), 16, true, true);
  ASSERT_EQ(tight.seq, 7);  // [CLS] + 5 + [SEP]
  EXPECT_EQ(tight.input_ids, (std::vector<int32_t>{101, 2000, 2001, 2002, 2003, 2004, 102,  //
                                                   101, 2000, 2001, 2002, 102, 0, 0}));
  EXPECT_EQ(tight.attention_mask, (std::vector<int32_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}));
  EXPECT_EQ(tight.token_type_ids, std::vector<int32_t>(14, 0));
  EXPECT_THROW(make_token_batch(examples, order, 0, 4, false, true), Error);
}

TEST(DataTokenBatches, MlmBatcherMasksFreshPerEpoch) {
  std::vector<size_t> lengths(64, 100);
  TokenBatcherOptions options;
  options.sampler = {.batch_size = 16, .seed = 5};
  options.seq_len = 128;
  TokenBatcher batcher(mlm_examples(mails_of_lengths(lengths), vocab(), 128), vocab(),
                       TokenTask::kMlm, options);
  ASSERT_EQ(batcher.batches_per_epoch(), 4u);
  const TokenBatch first = batcher.batch(1);
  EXPECT_EQ(first.mlm_labels, batcher.batch(1).mlm_labels);  // same batch, same masks
  EXPECT_TRUE(first.labels.empty());
  for (size_t i = 0; i < first.input_ids.size(); ++i) {
    if (first.attention_mask[i] == 0) {
      EXPECT_EQ(first.mlm_labels[i], kIgnoreIndex);
    }
    if (i % 128 == 0) {
      EXPECT_EQ(first.input_ids[i], vocab().cls_id());
    }
  }
  batcher.set_epoch(1);
  EXPECT_NE(first.mlm_labels, batcher.batch(1).mlm_labels);
  batcher.set_epoch(0);
  EXPECT_EQ(first.input_ids, batcher.batch(1).input_ids);
}

}  // namespace
}  // namespace kolo::trainer
