// BERT's masked-language-model corruption: 15% of the real, non-special tokens of a batch are
// selected; a selected token becomes [MASK] with probability 80%, a random regular token with
// 10%, and stays unchanged with 10%. Labels hold the original id at selected positions and
// kIgnoreIndex elsewhere. Specials ([CLS], [SEP], [PAD], [UNK], [unusedN]) and padding are
// never selected.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "trainer/data/batch.h"
#include "trainer/data/rng.h"
#include "trainer/data/vocab.h"

namespace kolo::trainer {

struct MlmOptions {
  double select_prob = 0.15;  // per eligible token, independently (as in Hugging Face's collator)
  double mask_prob = 0.8;     // of the selected: replaced by [MASK]
  double random_prob = 0.1;   // of the selected: replaced by a uniform id in [999, vocab size)
};

class MlmMasker {
 public:
  MlmMasker(const Vocab& vocab, MlmOptions options = {});

  // Corrupts batch.input_ids in place and sets batch.mlm_labels ([batch * seq]). Positions with
  // attention_mask 0 are padding. The same rng state gives the same masks.
  void apply(TokenBatch& batch, Rng& rng) const;
  // The same with one generator per row, rng(row): masks that depend on the example only, not
  // on which other examples share its batch (data-parallel ranks split batches differently).
  void apply_per_row(TokenBatch& batch, const std::function<Rng(size_t row)>& rng) const;

  bool eligible(int32_t id) const { return id >= 0 && id < vocab_size_ && !special_[id]; }

 private:
  void mask_row(TokenBatch& batch, size_t row, Rng& rng) const;

  MlmOptions options_;
  int32_t mask_id_;
  int32_t first_regular_id_;
  int32_t vocab_size_;
  std::vector<bool> special_;
};

}  // namespace kolo::trainer
