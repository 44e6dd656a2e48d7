// JsonSection: typed getters over a JSON object with errors that name the path and range.
#include "trainer/config/json_section.h"

#include <cmath>
#include <iostream>
#include <sstream>

#include "comm/base/error.h"

namespace kolo::trainer {

namespace {

std::string number_text(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// `value` (read at `where`, in `range`) checked as float32: see JsonSection::get_float.
void check_float32(const std::string& where, const nlohmann::json& written, double value,
                   const Range& range) {
  const float f = static_cast<float>(value);
  const bool kept = std::isfinite(f) && (f != 0) == (value != 0) && range.contains(f);
  KOLO_CHECK_ARG(kept, where, ": ", written.dump(), " becomes ", number_text(f),
                 " in float32, which the trainer computes with (accepted: ", range.text(),
                 ", and nonzero values between 1.4e-45 and 3.4e+38 in magnitude)");
}

}  // namespace

bool Range::contains(double v) const {
  const bool lo_ok = lo_inclusive ? v >= lo : v > lo;
  const bool hi_ok = hi_inclusive ? v <= hi : v < hi;
  return lo_ok && hi_ok;
}

std::string Range::text() const {
  if (std::isinf(lo) && std::isinf(hi)) return "any number";
  if (std::isinf(hi)) return (lo_inclusive ? ">= " : "> ") + number_text(lo);
  if (std::isinf(lo)) return (hi_inclusive ? "<= " : "< ") + number_text(hi);
  return (lo_inclusive ? "[" : "(") + number_text(lo) + ", " + number_text(hi) +
         (hi_inclusive ? "]" : ")");
}

std::string Range::out_of_range(const std::string& value) const {
  const bool interval = !std::isinf(lo) && !std::isinf(hi);
  return value + " is out of range " + (interval ? text() : "(" + text() + ")");
}

JsonSection::JsonSection(nlohmann::json value, std::string path, std::vector<std::string>* warnings)
    : value_(std::move(value)), path_(std::move(path)), warnings_(warnings) {
  if (value_.is_null()) value_ = nlohmann::json::object();
  KOLO_CHECK_ARG(value_.is_object(), path_.empty() ? "config" : path_.c_str(),
                 ": expected a JSON object, got ", value_.dump());
}

std::string JsonSection::key_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

const nlohmann::json* JsonSection::find(std::string_view key) const {
  auto it = value_.find(key);
  if (it == value_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonSection::has(std::string_view key) const {
  return find(key) != nullptr;
}

double JsonSection::get_double(std::string_view key, double fallback, Range range) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  KOLO_CHECK_ARG(v->is_number(), key_path(key), ": expected a number, got ", v->dump());
  const double d = v->get<double>();
  KOLO_CHECK_ARG(std::isfinite(d) && range.contains(d), key_path(key), ": ",
                 range.out_of_range(v->dump()));
  return d;
}

double JsonSection::get_float(std::string_view key, double fallback, Range range) const {
  const double d = get_double(key, fallback, range);
  if (const nlohmann::json* v = find(key)) check_float32(key_path(key), *v, d, range);
  return d;
}

std::vector<double> JsonSection::get_floats(std::string_view key,
                                            const std::vector<double>& fallback, size_t count,
                                            Range range) const {
  std::vector<double> out = get_doubles(key, fallback, count, range);
  if (const nlohmann::json* v = find(key))
    for (size_t i = 0; i < count; ++i)
      check_float32(key_path(key) + "[" + std::to_string(i) + "]", (*v)[i], out[i], range);
  return out;
}

int64_t JsonSection::get_int(std::string_view key, int64_t fallback, Range range) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  // DeepSpeed configs often write sizes as 5e8: accept floats with an integral value.
  const bool integral =
      v->is_number_integer() ||
      (v->is_number_float() && std::nearbyint(v->get<double>()) == v->get<double>() &&
       std::fabs(v->get<double>()) < 9.0e18);
  KOLO_CHECK_ARG(integral, key_path(key), ": expected an integer, got ", v->dump());
  const int64_t i =
      v->is_number_float() ? static_cast<int64_t>(v->get<double>()) : v->get<int64_t>();
  KOLO_CHECK_ARG(range.contains(static_cast<double>(i)), key_path(key), ": ",
                 range.out_of_range(v->dump()));
  return i;
}

bool JsonSection::get_bool(std::string_view key, bool fallback) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  KOLO_CHECK_ARG(v->is_boolean(), key_path(key), ": expected true or false, got ", v->dump());
  return v->get<bool>();
}

std::string JsonSection::get_string(std::string_view key, const std::string& fallback,
                                    const std::vector<std::string>& allowed) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  KOLO_CHECK_ARG(v->is_string(), key_path(key), ": expected a string, got ", v->dump());
  std::string s = v->get<std::string>();
  if (allowed.empty()) return s;
  std::string list;
  for (const std::string& a : allowed) {
    if (a == s) return s;
    list += (list.empty() ? "" : ", ") + a;
  }
  KOLO_THROW(ErrorCode::kInvalidArgument, key_path(key), ": ", v->dump(),
             " is not accepted (one of ", list, ")");
}

std::vector<double> JsonSection::get_doubles(std::string_view key,
                                             const std::vector<double>& fallback, size_t count,
                                             Range range) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  KOLO_CHECK_ARG(v->is_array() && v->size() == count, key_path(key), ": expected an array of ",
                 count, " numbers, got ", v->dump());
  std::vector<double> out;
  for (size_t i = 0; i < count; ++i) {
    const nlohmann::json& e = (*v)[i];
    const std::string where = key_path(key) + "[" + std::to_string(i) + "]";
    KOLO_CHECK_ARG(e.is_number(), where, ": expected a number, got ", e.dump());
    KOLO_CHECK_ARG(range.contains(e.get<double>()), where, ": ", range.out_of_range(e.dump()));
    out.push_back(e.get<double>());
  }
  return out;
}

JsonSection JsonSection::section(std::string_view key) const {
  const nlohmann::json* v = find(key);
  return JsonSection(v == nullptr ? nlohmann::json::object() : *v, key_path(key), warnings_);
}

std::vector<std::string> JsonSection::warn_unknown(const std::vector<std::string>& known) const {
  std::vector<std::string> out;
  for (auto it = value_.begin(); it != value_.end(); ++it) {
    bool found = false;
    for (const std::string& k : known) found = found || k == it.key();
    if (!found) out.push_back("unknown key '" + key_path(it.key()) + "' (ignored)");
  }
  if (warnings_ != nullptr) warnings_->insert(warnings_->end(), out.begin(), out.end());
  return out;
}

void print_config_warnings(const std::vector<std::string>& warnings) {
  for (const std::string& w : warnings) std::cerr << "kolo config: warning: " << w << "\n";
}

}  // namespace kolo::trainer
