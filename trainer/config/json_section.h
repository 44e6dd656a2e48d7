// Typed, validating reads from one object of a JSON config: each getter names the full dotted
// path and the accepted range in its error ("fp16.hysteresis: 0 is out of range (>= 1)"). Used
// for the DeepSpeed sections and by the programs for their own "kolo" section.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kolo::trainer {

// An interval of accepted numbers with its text for messages.
struct Range {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_inclusive = true;
  bool hi_inclusive = true;

  static Range any() { return {}; }
  static Range at_least(double v) {
    return {v, std::numeric_limits<double>::infinity(), true, true};
  }
  static Range above(double v) { return {v, std::numeric_limits<double>::infinity(), false, true}; }
  static Range closed(double lo, double hi) { return {lo, hi, true, true}; }      // [lo, hi]
  static Range half_open(double lo, double hi) { return {lo, hi, true, false}; }  // [lo, hi)
  bool contains(double v) const;
  std::string text() const;  // ">= 1", "> 0", "[0, 3]", "[0, 1)"
  // "<value> is out of range (>= 1)" or "<value> is out of range [0, 3]".
  std::string out_of_range(const std::string& value) const;
};

class JsonSection {
 public:
  // value must be a JSON object (or null, read as empty); path is its dotted name ("" for
  // the root). warnings, when given, collects the unknown-key warnings of warn_unknown().
  JsonSection(nlohmann::json value, std::string path, std::vector<std::string>* warnings = nullptr);
  JsonSection() : JsonSection(nlohmann::json::object(), "") {}

  bool has(std::string_view key) const;
  // Absent keys (or null values) give the default; a value of the wrong type or out of range
  // throws kolo::Error(kInvalidArgument) naming path.key, the value and what is accepted.
  int64_t get_int(std::string_view key, int64_t fallback, Range range = Range::any()) const;
  double get_double(std::string_view key, double fallback, Range range = Range::any()) const;
  // A number the trainer computes with in float32 (a learning rate, a loss scale, eps): also
  // refused when float32 turns it into another value's meaning: a nonzero one into 0
  // (1e-50), or one into infinity or out of `range` (0.9999999999 becomes 1).
  double get_float(std::string_view key, double fallback, Range range = Range::any()) const;
  std::vector<double> get_floats(std::string_view key, const std::vector<double>& fallback,
                                 size_t count, Range range = Range::any()) const;
  bool get_bool(std::string_view key, bool fallback) const;
  std::string get_string(std::string_view key, const std::string& fallback,
                         const std::vector<std::string>& allowed = {}) const;
  std::vector<double> get_doubles(std::string_view key, const std::vector<double>& fallback,
                                  size_t count, Range range = Range::any()) const;
  // A nested object (absent: an empty one), sharing the warning list.
  JsonSection section(std::string_view key) const;

  // "unknown key 'path.key' (ignored)" for each key not in known: returned, and appended to
  // the warning list when this section has one.
  std::vector<std::string> warn_unknown(const std::vector<std::string>& known) const;

  std::string key_path(std::string_view key) const;  // "fp16.hysteresis"
  const std::string& path() const { return path_; }
  const nlohmann::json& json() const { return value_; }

 private:
  const nlohmann::json* find(std::string_view key) const;  // null when absent or null

  nlohmann::json value_;
  std::string path_;
  std::vector<std::string>* warnings_;
};

// Writes each warning to stderr as "kolo config: warning: <text>".
void print_config_warnings(const std::vector<std::string>& warnings);

}  // namespace kolo::trainer
