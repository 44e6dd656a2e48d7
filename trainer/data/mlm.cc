// MLM masking; see mlm.h for the rule.
#include "trainer/data/mlm.h"

#include "comm/base/error.h"

namespace kolo::trainer {

MlmMasker::MlmMasker(const Vocab& vocab, MlmOptions options)
    : options_(options),
      mask_id_(vocab.mask_id()),
      first_regular_id_(vocab.first_regular_id()),
      vocab_size_(vocab.size()),
      special_(static_cast<size_t>(vocab.size())) {
  KOLO_CHECK_ARG(options_.select_prob >= 0 && options_.select_prob <= 1, "MLM select probability ",
                 options_.select_prob, " outside [0, 1]");
  KOLO_CHECK_ARG(options_.mask_prob >= 0 && options_.random_prob >= 0 &&
                     options_.mask_prob + options_.random_prob <= 1,
                 "MLM mask/random probabilities ", options_.mask_prob, " + ", options_.random_prob,
                 " must be non-negative and sum to at most 1");
  for (int32_t id = 0; id < vocab_size_; ++id)
    special_[static_cast<size_t>(id)] = vocab.is_special(id);
}

void MlmMasker::apply(TokenBatch& batch, Rng& rng) const {
  const size_t n = static_cast<size_t>(batch.batch) * static_cast<size_t>(batch.seq);
  KOLO_CHECK_EQ(batch.input_ids.size(), n, ErrorCode::kInvalidArgument, "MLM input_ids size");
  KOLO_CHECK_EQ(batch.attention_mask.size(), n, ErrorCode::kInvalidArgument,
                "MLM attention_mask size");
  batch.mlm_labels.assign(n, kIgnoreIndex);
  for (size_t row = 0; row < static_cast<size_t>(batch.batch); ++row) mask_row(batch, row, rng);
}

void MlmMasker::apply_per_row(TokenBatch& batch, const std::function<Rng(size_t row)>& rng) const {
  const size_t n = static_cast<size_t>(batch.batch) * static_cast<size_t>(batch.seq);
  KOLO_CHECK_EQ(batch.input_ids.size(), n, ErrorCode::kInvalidArgument, "MLM input_ids size");
  KOLO_CHECK_EQ(batch.attention_mask.size(), n, ErrorCode::kInvalidArgument,
                "MLM attention_mask size");
  batch.mlm_labels.assign(n, kIgnoreIndex);
  for (size_t row = 0; row < static_cast<size_t>(batch.batch); ++row) {
    Rng row_rng = rng(row);
    mask_row(batch, row, row_rng);
  }
}

void MlmMasker::mask_row(TokenBatch& batch, size_t row, Rng& rng) const {
  const uint64_t regular = static_cast<uint64_t>(vocab_size_ - first_regular_id_);
  const size_t seq = static_cast<size_t>(batch.seq);
  for (size_t i = row * seq; i < (row + 1) * seq; ++i) {
    const int32_t id = batch.input_ids[i];
    if (batch.attention_mask[i] == 0 || !eligible(id)) continue;
    if (rng.uniform() >= options_.select_prob) continue;
    batch.mlm_labels[i] = id;
    const double action = rng.uniform();
    if (action < options_.mask_prob) {
      batch.input_ids[i] = mask_id_;
    } else if (action < options_.mask_prob + options_.random_prob) {
      batch.input_ids[i] = first_regular_id_ + static_cast<int32_t>(rng.below(regular));
    }  // else: kept as it is, but still predicted
  }
}

}  // namespace kolo::trainer
