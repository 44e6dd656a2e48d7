// Depth-limited JSON parsing (json_text.h).
#include "trainer/io/json_text.h"

#include "comm/base/error.h"
#include "trainer/io/message_text.h"

namespace kolo::trainer {
namespace {

nlohmann::json parse_limited(std::string_view text, const std::string& what, bool exceptions) {
  // The callback sees every value with its depth as the parser reaches it, before any deep
  // structure exists, and every key of the open objects.
  using Event = nlohmann::json::parse_event_t;
  JsonKeyCheck keys(what);
  auto limit = [&](int depth, Event event, nlohmann::json& parsed) {
    if (depth > kMaxJsonDepth)
      KOLO_THROW(ErrorCode::kInvalidArgument, what, ": nested deeper than ", kMaxJsonDepth,
                 " levels");
    if (event == Event::object_start) keys.start_object();
    if (event == Event::object_end) keys.end_object();
    if (event == Event::key) keys.key(parsed.get<std::string>());
    return true;
  };
  return nlohmann::json::parse(text, limit, exceptions);
}

}  // namespace

void throw_invalid_json(const std::string& what, std::string_view parser_message) {
  KOLO_THROW(ErrorCode::kInvalidArgument, what,
             ": not valid JSON: ", printable_text(parser_message));
}

void JsonKeyCheck::key(const std::string& key) {
  // The parser would keep the last of two equal keys, so a setting written twice would
  // silently take one of its values.
  if (open_.back().insert(key).second) return;
  // Quoted, control characters escaped.
  std::string shown =
      nlohmann::json(key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (shown.size() > 80) shown = shown.substr(0, 76) + "...\"";
  KOLO_THROW(ErrorCode::kInvalidArgument, what_, ": the key ", shown,
             " appears twice in one object");
}

nlohmann::json parse_json(std::string_view text, const std::string& what) {
  try {
    return parse_limited(text, what, true);
  } catch (const nlohmann::json::exception& e) {  // parse_error; out_of_range for 1e400
    throw_invalid_json(what, e.what());
  }
}

nlohmann::json parse_json_or_discarded(std::string_view text, const std::string& what) {
  try {
    return parse_limited(text, what, false);
  } catch (const nlohmann::json::exception&) {
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
}

}  // namespace kolo::trainer
