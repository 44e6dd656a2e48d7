// JSON from outside the process (config files and overrides, checkpoint indexes, safetensors
// headers, data lists, model configs), parsed by nlohmann-json with its nesting limited: kolo's
// own documents nest a few levels, and a document nested 100,000 deep would be built only to
// overflow the stack in the first copy or comparison (each recurses once per level). A deeper
// one is refused before it is built, naming what it is. So is a key that appears twice in one
// object (the parser would keep the last silently), as DeepSpeed refuses in its config; the
// SAX readers of large data files (the MNIST digits) refuse it through the same JsonKeyCheck.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kolo::trainer {

constexpr int kMaxJsonDepth = 64;

// The document, or kolo::Error(kInvalidArgument) "<what>: not valid JSON: <the parser's
// message, with its line and column>" / "<what>: nested deeper than 64 levels" / "<what>: the
// key "lr" appears twice in one object".
nlohmann::json parse_json(std::string_view text, const std::string& what);
// The same, but text that is not JSON gives a discarded value (is_discarded()), for callers
// with a fallback (a --set value that is a bare word); too deep a document still throws.
nlohmann::json parse_json_or_discarded(std::string_view text, const std::string& what);

// kolo::Error(kInvalidArgument) "<what>: not valid JSON: <parser_message>", the message's raw
// bytes escaped (an invalid UTF-8 byte the parser quotes would reach the terminal as it is).
[[noreturn]] void throw_invalid_json(const std::string& what, std::string_view parser_message);

// The keys of each object open at a point of a parse, fed by the parser's events: a key seen
// twice in one object throws kolo::Error(kInvalidArgument) "<what>: the key "data" appears
// twice in one object".
class JsonKeyCheck {
 public:
  explicit JsonKeyCheck(std::string what) : what_(std::move(what)) {}
  void start_object() { open_.emplace_back(); }
  void end_object() { open_.pop_back(); }
  void key(const std::string& key);

 private:
  std::string what_;
  std::vector<std::set<std::string>> open_;
};

}  // namespace kolo::trainer
