// Reading KOLO_* (and launcher) environment variables with validation: a bad value raises
// kolo::Error naming the variable, the value and the accepted range. docs/configuration.md
// lists every variable.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace kolo::env {

std::optional<std::string> get(const char* name);  // unset and empty both give nullopt
std::string get_or(const char* name, const std::string& fallback);

// Integer in [min, max]; `fallback` when unset.
int64_t get_int(const char* name, int64_t fallback, int64_t min, int64_t max);
std::optional<int64_t> get_int_opt(const char* name, int64_t min, int64_t max);
double get_double(const char* name, double fallback, double min, double max);
bool get_bool(const char* name, bool fallback);  // 1/0, true/false, yes/no, on/off

// KOLO_TIMEOUT_SECONDS: how long any wait may go without progress (default 300 s).
std::chrono::milliseconds timeout();
inline constexpr double kDefaultTimeoutSeconds = 300.0;
// The range of every timeout kolo takes (KOLO_TIMEOUT_SECONDS, CommunicatorOptions::timeout,
// Python's timeout_seconds): 1 ms to 7 days.
inline constexpr double kMinTimeoutSeconds = 0.001;
inline constexpr double kMaxTimeoutSeconds = 86400.0 * 7;

// Parsing helpers shared with command-line flags; `setting` names the source in errors.
int64_t parse_int(const std::string& text, const char* setting, int64_t min, int64_t max);
double parse_double(const std::string& text, const char* setting, double min, double max);

}  // namespace kolo::env
