// Basic tokenisation and greedy longest-match-first WordPiece, following BERT's tokenization.py
// (BasicTokenizer with do_lower_case, WordpieceTokenizer with max_input_chars_per_word = 100).
#include "trainer/data/wordpiece.h"

#include <algorithm>

#include "comm/base/error.h"
#include "trainer/data/unicode.h"

namespace kolo::trainer {

void WordPieceTokenizer::for_each_word(std::string_view text,
                                       const std::function<bool(std::string_view)>& on_word) const {
  std::string word;
  std::string single;  // a punctuation mark or CJK ideograph, a token of its own
  bool stopped = false;
  const auto flush = [&](std::string& token) {
    if (!token.empty() && !stopped) stopped = !on_word(token);
    token.clear();
  };
  for (size_t pos = 0; pos < text.size() && !stopped;) {
    const char32_t raw = unicode::decode_next(text, pos);
    if (raw == 0 || raw == unicode::kReplacement || unicode::is_control(raw)) continue;
    if (unicode::is_whitespace(raw)) {
      flush(word);
      continue;
    }
    const char32_t cp = unicode::fold_uncased(raw);
    if (unicode::is_combining_mark(cp)) continue;  // the accent-strip half of NFD + drop Mn
    if (unicode::is_punctuation(cp) || unicode::is_cjk(cp)) {
      flush(word);
      unicode::append_utf8(single, cp);
      flush(single);
      continue;
    }
    unicode::append_utf8(word, cp);
  }
  flush(word);
}

std::vector<std::string> WordPieceTokenizer::basic_tokenize(std::string_view text) const {
  std::vector<std::string> words;
  for_each_word(text, [&](std::string_view word) {
    words.emplace_back(word);
    return true;
  });
  return words;
}

void WordPieceTokenizer::wordpiece(std::string_view word, std::vector<int32_t>& out) const {
  // Byte offsets of the code-point boundaries: pieces never split a UTF-8 sequence.
  std::vector<size_t> bounds;
  for (size_t pos = 0; pos < word.size();) {
    bounds.push_back(pos);
    unicode::decode_next(word, pos);
  }
  bounds.push_back(word.size());
  const size_t chars = bounds.size() - 1;
  if (chars > kMaxWordChars) {
    out.push_back(vocab_.unk_id());
    return;
  }
  const size_t first_piece = out.size();
  std::string candidate;
  for (size_t start = 0; start < chars;) {
    // Longest piece first; nothing longer than the vocabulary's longest token can match.
    int32_t id = -1;
    size_t end = chars;
    for (; end > start; --end) {
      const size_t bytes = bounds[end] - bounds[start];
      if (bytes + (start > 0 ? 2 : 0) > vocab_.max_token_bytes()) continue;
      candidate.assign(start > 0 ? "##" : "");
      candidate.append(word.substr(bounds[start], bytes));
      id = vocab_.find(candidate);
      if (id >= 0) break;
    }
    if (id < 0) {  // some suffix matches no piece: the whole word is unknown
      out.resize(first_piece);
      out.push_back(vocab_.unk_id());
      return;
    }
    out.push_back(id);
    start = end;
  }
}

std::vector<int32_t> WordPieceTokenizer::tokenize(std::string_view text, size_t max_tokens) const {
  std::vector<int32_t> ids;
  if (max_tokens == 0) return ids;
  for_each_word(text, [&](std::string_view word) {
    wordpiece(word, ids);
    return ids.size() < max_tokens;
  });
  if (ids.size() > max_tokens) ids.resize(max_tokens);
  return ids;
}

std::vector<std::string> WordPieceTokenizer::tokenize_to_strings(std::string_view text) const {
  std::vector<std::string> pieces;
  for (const int32_t id : tokenize(text)) pieces.push_back(vocab_.token(id));
  return pieces;
}

std::vector<int32_t> WordPieceTokenizer::encode(std::string_view text, size_t max_len) const {
  KOLO_CHECK_ARG(max_len >= 2, "max_len ", max_len, " cannot hold [CLS] and [SEP]");
  std::vector<int32_t> ids;
  ids.reserve(max_len);
  ids.push_back(vocab_.cls_id());
  const std::vector<int32_t> pieces = tokenize(text, max_len - 2);
  ids.insert(ids.end(), pieces.begin(), pieces.end());
  ids.push_back(vocab_.sep_id());
  return ids;
}

}  // namespace kolo::trainer
