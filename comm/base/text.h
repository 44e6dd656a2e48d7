// Small pieces of text for error and log messages, shared by every layer: a list joined with a
// separator ("0, 2, 3") and a tensor shape ("[2, 3]").
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

}  // namespace kolo
