// kolo::Error: an exception carrying an ErrorCode; the message is prefixed with the code's name.
#include "comm/base/error.h"

#include <mutex>
#include <set>

namespace kolo {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kPeerLost: return "peer lost";
    case ErrorCode::kMismatch: return "mismatch";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kAuth: return "authentication";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(std::string("kolo ") + error_code_name(code) + " error: " + message),
      code_(code),
      message_(message) {}

namespace detail {

const char* unnamed_value(const char* kind, int value) {
  // A set's nodes never move: the pointers handed out stay valid as more names are added.
  static std::mutex mutex;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  return names.insert(std::string(kind) + " " + std::to_string(value)).first->c_str();
}

}  // namespace detail

}  // namespace kolo
