// The uncased BERT tokenizer: basic tokenisation (drop control characters, split on whitespace,
// lower-case and strip accents, split off punctuation and CJK ideographs), then greedy
// longest-match-first WordPiece with "##" continuations and [UNK] for unmatchable words.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/data/vocab.h"

namespace kolo::trainer {

class WordPieceTokenizer {
 public:
  static constexpr size_t kMaxWordChars = 100;  // longer words become one [UNK], as in BERT

  explicit WordPieceTokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}

  const Vocab& vocab() const { return vocab_; }

  // Basic tokenisation only: the normalised words and punctuation marks, as UTF-8.
  std::vector<std::string> basic_tokenize(std::string_view text) const;

  // WordPiece ids of `text` without [CLS]/[SEP]; stops after max_tokens ids, so a long mail
  // costs only the prefix that is kept.
  std::vector<int32_t> tokenize(std::string_view text,
                                size_t max_tokens = std::numeric_limits<size_t>::max()) const;

  // The pieces as strings ("straw", "##berries"): for tests and debugging.
  std::vector<std::string> tokenize_to_strings(std::string_view text) const;

  // [CLS] pieces... [SEP], with the pieces truncated so the whole is at most max_len (>= 2) ids.
  std::vector<int32_t> encode(std::string_view text, size_t max_len) const;

  // Appends the WordPiece ids of one basic token (already normalised).
  void wordpiece(std::string_view word, std::vector<int32_t>& out) const;

 private:
  // Calls on_word for each basic token in order until it returns false.
  void for_each_word(std::string_view text,
                     const std::function<bool(std::string_view)>& on_word) const;

  Vocab vocab_;
};

}  // namespace kolo::trainer
