// Small pieces of text for error and log messages, shared by every layer: a list joined with a
// separator ("0, 2, 3"), a tensor shape ("[2, 3]"), a word quoted for sh.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace kolo {

template <typename Range>
std::string join_text(const Range& items, std::string_view separator = ", ") {
  std::ostringstream out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out << separator;
    out << item;
    first = false;
  }
  return out.str();
}

inline std::string shape_text(const std::vector<int64_t>& shape) {
  return "[" + join_text(shape) + "]";
}

// `word` as one word for sh (a remote shell, popen): unchanged when it holds only characters that
// sh takes literally (letters, digits and _@%+=:,./-), else in single quotes, each ' in it
// written as '\''.
inline std::string shell_quote(const std::string& word) {
  bool plain = !word.empty();
  for (char c : word) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
    plain = plain && safe;
  }
  if (plain) return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace kolo
