// JSON from outside the process (config files and overrides, checkpoint indexes, safetensors
// headers, data lists, model configs), parsed by nlohmann-json with its nesting limited: kolo's
// own documents nest a few levels, and a document nested 100,000 deep would be built only to
// overflow the stack in the first copy or comparison (each recurses once per level). A deeper
// one is refused before it is built, naming what it is. So is a key that appears twice in one
// object (the parser would keep the last silently), as DeepSpeed refuses in its config.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kolo::trainer {

constexpr int kMaxJsonDepth = 64;

// The document, or kolo::Error(kInvalidArgument) "<what>: not valid JSON: <the parser's
// message>" / "<what>: nested deeper than 64 levels" / "<what>: the key "lr" appears twice in
// one object".
nlohmann::json parse_json(std::string_view text, const std::string& what);
// The same, but text that is not JSON gives a discarded value (is_discarded()), for callers
// with their own message or a fallback; too deep a document still throws.
nlohmann::json parse_json_or_discarded(std::string_view text, const std::string& what);

}  // namespace kolo::trainer
