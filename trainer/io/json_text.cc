// Depth-limited JSON parsing (json_text.h).
#include "trainer/io/json_text.h"

#include "comm/base/error.h"

namespace kolo::trainer {
namespace {

nlohmann::json parse_limited(std::string_view text, const std::string& what, bool exceptions) {
  // The callback sees every value with its depth as the parser reaches it, before any deep
  // structure exists.
  auto limit = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth)
      KOLO_THROW(ErrorCode::kInvalidArgument, what, ": nested deeper than ", kMaxJsonDepth,
                 " levels");
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
