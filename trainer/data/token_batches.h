// Token sequences for BERT: examples cut from the tokenised mails ([CLS] tokens [SEP]), and the
// batcher that pads them into TokenBatch batches in a seeded order, for sequence classification
// (labels) or MLM pretraining (masked input_ids + mlm_labels, fresh masks every epoch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "trainer/data/batch.h"
#include "trainer/data/mlm.h"
#include "trainer/data/sampler.h"
#include "trainer/data/spam.h"
#include "trainer/data/vocab.h"

namespace kolo::trainer {

struct TokenExample {
  std::vector<int32_t> ids;  // [CLS] ... [SEP], at most the batcher's seq_len
  int32_t label = 0;         // the class (spam/ham) for classification
};

// One example per mail: [CLS] + its first seq_len - 2 tokens + [SEP], labelled with the mail's
// label.
std::vector<TokenExample> classification_examples(const std::vector<Mail>& mails,
                                                  const Vocab& vocab, size_t seq_len);

// Each mail's tokens cut into consecutive windows of seq_len - 2, each as [CLS] window [SEP]. A
// mail's first window is always kept; a later, shorter last window only when it is at least half
// the window length (mostly-padding sequences train little). At most max_windows per mail.
std::vector<TokenExample> mlm_examples(const std::vector<Mail>& mails, const Vocab& vocab,
                                       size_t seq_len,
                                       size_t max_windows = std::numeric_limits<size_t>::max());

enum class TokenTask { kClassification, kMlm };

struct TokenBatcherOptions {
  SamplerOptions sampler;         // batch size, shuffle, seed, rank / world size
  size_t seq_len = 128;           // longest sequence; batches are padded to it ...
  bool pad_to_batch_max = false;  // ... or only to the longest sequence of the batch
  MlmOptions mlm;                 // used for TokenTask::kMlm
};

// Pads examples[indices] into one batch: input_ids (padding [PAD]), attention_mask (1 real, 0
// pad), token_type_ids all 0, labels when with_labels. No masking.
TokenBatch make_token_batch(const std::vector<TokenExample>& examples,
                            std::span<const size_t> indices, int32_t pad_id, size_t seq_len,
                            bool pad_to_batch_max, bool with_labels);

class TokenBatcher {
 public:
  TokenBatcher(std::vector<TokenExample> examples, const Vocab& vocab, TokenTask task,
               TokenBatcherOptions options);

  void set_epoch(uint64_t epoch) { sampler_.set_epoch(epoch); }
  size_t batches_per_epoch() const { return sampler_.batches_per_epoch(); }
  size_t examples() const { return examples_.size(); }

  // Batch `index` of the current epoch. For MLM each example's masks come from an Rng seeded by
  // (seed, epoch, example index): the same batch twice gives the same masks, a new epoch new
  // ones, and an example is masked alike however the ranks split the global batch.
  TokenBatch batch(size_t index) const;

 private:
  std::vector<TokenExample> examples_;
  TokenTask task_;
  TokenBatcherOptions options_;
  int32_t pad_id_;
  EpochSampler sampler_;
  MlmMasker masker_;
};

}  // namespace kolo::trainer
