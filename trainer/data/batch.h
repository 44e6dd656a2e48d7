// The batches that data pipelines produce and models consume: token batches for BERT (MLM and
// sequence classification) and dense feature batches for the MLP.
#pragma once

#include <cstdint>
#include <vector>

namespace kolo::trainer {

inline constexpr int32_t kIgnoreIndex = -100;  // label of a position that no loss looks at

struct TokenBatch {
  int batch = 0;                        // sequences
  int seq = 0;                          // tokens per sequence (padded)
  std::vector<int32_t> input_ids;       // [batch * seq]
  std::vector<int32_t> token_type_ids;  // [batch * seq], 0 for single-segment input
  std::vector<int32_t> attention_mask;  // [batch * seq], 1 for real tokens, 0 for padding
  std::vector<int32_t> mlm_labels;      // [batch * seq] original ids or kIgnoreIndex; empty: no MLM
  std::vector<int32_t> labels;          // [batch] class ids; empty: no classification
};

struct FeatureBatch {
  int batch = 0;
  int features = 0;
  std::vector<float> inputs;    // [batch * features]
  std::vector<int32_t> labels;  // [batch]
};

}  // namespace kolo::trainer
