// Validated access to environment variables.
#include "comm/base/env.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "comm/base/error.h"

namespace kolo::env {

std::optional<std::string> get(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::string get_or(const char* name, const std::string& fallback) {
  return get(name).value_or(fallback);
}

namespace {

// Plain decimal text only: strtoll and strtod also take leading blanks (not trailing ones),
// and strtod hex, inf and nan.
bool plain_number(const std::string& text, bool fraction) {
  const std::string allowed = fraction ? "0123456789+-.eE" : "0123456789+-";
  return !text.empty() && text.find_first_not_of(allowed) == std::string::npos;
}

}  // namespace

int64_t parse_int(const std::string& text, const char* setting, int64_t min, int64_t max) {
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  bool ok = plain_number(text, false) && errno == 0 && end != text.c_str() && *end == '\0';
  KOLO_CHECK_ARG(ok && value >= min && value <= max, setting, "='", text,
                 "' is not accepted; expected an integer in [", min, ", ", max, "]");
  return value;
}

double parse_double(const std::string& text, const char* setting, double min, double max) {
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(text.c_str(), &end);
  bool ok = plain_number(text, true) && errno == 0 && end != text.c_str() && *end == '\0';
  KOLO_CHECK_ARG(ok && value >= min && value <= max, setting, "='", text,
                 "' is not accepted; expected a number in [", min, ", ", max, "]");
  return value;
}

int64_t get_int(const char* name, int64_t fallback, int64_t min, int64_t max) {
  return get_int_opt(name, min, max).value_or(fallback);
}

std::optional<int64_t> get_int_opt(const char* name, int64_t min, int64_t max) {
  auto text = get(name);
  if (!text) return std::nullopt;
  return parse_int(*text, name, min, max);
}

double get_double(const char* name, double fallback, double min, double max) {
  auto text = get(name);
  return text ? parse_double(*text, name, min, max) : fallback;
}

bool get_bool(const char* name, bool fallback) {
  auto text = get(name);
  if (!text) return fallback;
  std::string v = *text;
  std::transform(v.begin(), v.end(), v.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  KOLO_THROW(ErrorCode::kInvalidArgument, name, "='", *text,
             "' is not accepted; expected one of 1, 0, true, false, yes, no, on, off");
}

std::chrono::milliseconds timeout() {
  double seconds = get_double("KOLO_TIMEOUT_SECONDS", kDefaultTimeoutSeconds, kMinTimeoutSeconds,
                              kMaxTimeoutSeconds);
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

}  // namespace kolo::env
