// Building token examples from mails and padding them into TokenBatch batches.
#include "trainer/data/token_batches.h"

#include <algorithm>

#include "comm/base/error.h"

namespace kolo::trainer {
namespace {

constexpr uint64_t kMlmStream = 0x4d4c4d5f6d61736bULL;  // "MLM_mask": masks apart from shuffles

TokenExample wrap(const Vocab& vocab, std::span<const int32_t> tokens, int32_t label) {
  TokenExample example;
  example.label = label;
  example.ids.reserve(tokens.size() + 2);
  example.ids.push_back(vocab.cls_id());
  example.ids.insert(example.ids.end(), tokens.begin(), tokens.end());
  example.ids.push_back(vocab.sep_id());
  return example;
}

}  // namespace

std::vector<TokenExample> classification_examples(const std::vector<Mail>& mails,
                                                  const Vocab& vocab, size_t seq_len) {
  KOLO_CHECK_ARG(seq_len >= 2, "seq_len ", seq_len, " cannot hold [CLS] and [SEP]");
  std::vector<TokenExample> examples;
  examples.reserve(mails.size());
  for (const Mail& mail : mails) {
    const size_t n = std::min(mail.tokens.size(), seq_len - 2);
    examples.push_back(wrap(vocab, std::span<const int32_t>(mail.tokens).first(n), mail.label));
  }
  return examples;
}

std::vector<TokenExample> mlm_examples(const std::vector<Mail>& mails, const Vocab& vocab,
                                       size_t seq_len, size_t max_windows) {
  KOLO_CHECK_ARG(seq_len >= 3, "MLM seq_len ", seq_len, " leaves no room for tokens");
  const size_t window = seq_len - 2;
  std::vector<TokenExample> examples;
  for (const Mail& mail : mails) {
    const std::span<const int32_t> tokens(mail.tokens);
    for (size_t start = 0, count = 0; start < tokens.size() && count < max_windows;
         start += window, ++count) {
      const size_t n = std::min(window, tokens.size() - start);
      if (start > 0 && 2 * n < window) break;
      examples.push_back(wrap(vocab, tokens.subspan(start, n), mail.label));
    }
  }
  return examples;
}

TokenBatch make_token_batch(const std::vector<TokenExample>& examples,
                            std::span<const size_t> indices, int32_t pad_id, size_t seq_len,
                            bool pad_to_batch_max, bool with_labels) {
  size_t longest = 0;
  for (const size_t i : indices) {
    KOLO_CHECK_ARG(i < examples.size(), "example ", i, " past the ", examples.size(), " examples");
    KOLO_CHECK_ARG(examples[i].ids.size() <= seq_len, "example ", i, " has ",
                   examples[i].ids.size(), " tokens, more than seq_len ", seq_len);
    longest = std::max(longest, examples[i].ids.size());
  }
  TokenBatch batch;
  batch.batch = static_cast<int>(indices.size());
  batch.seq = static_cast<int>(pad_to_batch_max ? longest : seq_len);
  const size_t seq = static_cast<size_t>(batch.seq);
  batch.input_ids.assign(indices.size() * seq, pad_id);
  batch.attention_mask.assign(indices.size() * seq, 0);
  batch.token_type_ids.assign(indices.size() * seq, 0);
  for (size_t row = 0; row < indices.size(); ++row) {
    const std::vector<int32_t>& ids = examples[indices[row]].ids;
    std::copy(ids.begin(), ids.end(), batch.input_ids.begin() + row * seq);
    std::fill_n(batch.attention_mask.begin() + row * seq, ids.size(), 1);
    if (with_labels) batch.labels.push_back(examples[indices[row]].label);
  }
  return batch;
}

TokenBatcher::TokenBatcher(std::vector<TokenExample> examples, const Vocab& vocab, TokenTask task,
                           TokenBatcherOptions options)
    : examples_(std::move(examples)),
      task_(task),
      options_(options),
      pad_id_(vocab.pad_id()),
      sampler_(examples_.size(), options.sampler),
      masker_(vocab, options.mlm) {}

TokenBatch TokenBatcher::batch(size_t index) const {
  const bool mlm = task_ == TokenTask::kMlm;
  const std::span<const size_t> indices = sampler_.batch_indices(index);
  TokenBatch batch = make_token_batch(examples_, indices, pad_id_, options_.seq_len,
                                      options_.pad_to_batch_max, !mlm);
  if (mlm) {
    masker_.apply_per_row(batch, [&](size_t row) {
      return Rng(mix_seed(options_.sampler.seed ^ kMlmStream, sampler_.epoch(), indices[row]));
    });
  }
  return batch;
}

}  // namespace kolo::trainer
