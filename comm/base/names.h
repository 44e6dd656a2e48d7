// Case-insensitive lookup of an enum value by name, shared by the parsers of DType, ReduceOp,
// Algorithm and TransportKind. Internal to comm/base; not installed.
#pragma once

#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <string_view>
#include <utility>

#include "comm/base/error.h"

namespace kolo::detail {

// "a, b, c": every name in `table`, for error messages.
template <typename E, size_t N>
std::string accepted_names(const std::array<std::pair<const char*, E>, N>& table) {
  std::string accepted;
  for (const auto& entry : table)
    accepted += (accepted.empty() ? "" : ", ") + std::string(entry.first);
  return accepted;
}

inline std::string lower_case(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return lower;
}

// The name of enum value `value` in `names` (indexed by the value), or "<kind> <value>" for a
// value the table lacks (an integer cast to the enum unchecked: reading past the table gave
// another table's strings, or crashed).
template <typename E, size_t N>
const char* enum_name(const char* const (&names)[N], E value, const char* kind) {
  const auto i = static_cast<size_t>(value);
  return i < N ? names[i] : unnamed_value(kind, static_cast<int>(i));
}

// The value named `text` in `table`; otherwise kolo::Error kInvalidArgument naming `setting`
// and every accepted name.
template <typename E, size_t N>
E parse_name(std::string_view text, std::string_view setting, const char* what,
             const std::array<std::pair<const char*, E>, N>& table) {
  const std::string lower = lower_case(text);
  for (const auto& [name, value] : table)
    if (lower == name) return value;
  KOLO_THROW(ErrorCode::kInvalidArgument, setting, "='", text, "' is not a valid ", what,
             "; accepted: ", accepted_names(table));
}

}  // namespace kolo::detail
