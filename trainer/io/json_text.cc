// Depth-limited JSON parsing (json_text.h).
#include "trainer/io/json_text.h"

#include <set>
#include <vector>

#include "comm/base/error.h"

namespace kolo::trainer {
namespace {

nlohmann::json parse_limited(std::string_view text, const std::string& what, bool exceptions) {
  // The callback sees every value with its depth as the parser reaches it, before any deep
  // structure exists. It also keeps the keys of each open object: the parser would keep the
  // last of two equal keys, so a setting written twice would silently take one of its values.
  using Event = nlohmann::json::parse_event_t;
  std::vector<std::set<std::string>> open_objects;
  auto limit = [&](int depth, Event event, nlohmann::json& parsed) {
    if (depth > kMaxJsonDepth)
      KOLO_THROW(ErrorCode::kInvalidArgument, what, ": nested deeper than ", kMaxJsonDepth,
                 " levels");
    if (event == Event::object_start) open_objects.emplace_back();
    if (event == Event::object_end) open_objects.pop_back();
    if (event == Event::key && !open_objects.back().insert(parsed.get<std::string>()).second) {
      std::string key = parsed.dump();  // quoted, control characters escaped
      if (key.size() > 80) key = key.substr(0, 76) + "...\"";
      KOLO_THROW(ErrorCode::kInvalidArgument, what, ": the key ", key,
                 " appears twice in one object");
    }
    return true;
  };
  return nlohmann::json::parse(text, limit, exceptions);
}

}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& what) {
  try {
    return parse_limited(text, what, true);
  } catch (const nlohmann::json::exception& e) {  // parse_error; out_of_range for 1e400
    KOLO_THROW(ErrorCode::kInvalidArgument, what, ": not valid JSON: ", e.what());
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
