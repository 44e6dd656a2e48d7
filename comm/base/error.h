// kolo::Error, the one exception type of the library, and the check macros that raise it.
// The error policy (which code for which failure, what a message must name) is docs/errors.md.
#pragma once

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>

namespace kolo {

enum class ErrorCode {
  kInvalidArgument,  // a bad option, environment value or argument: fix the call
  kTimeout,          // a deadline (KOLO_TIMEOUT_SECONDS) passed with no progress
  kPeerLost,         // a peer died, closed its connection or aborted
  kMismatch,         // ranks disagree about a collective (count, dtype, op, root)
  kIo,               // a system call, socket or shared-memory failure
  kAuth,             // a handshake with a wrong secret or protocol version
  kInternal,         // a broken invariant inside kolo: a bug, please report it
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const { return code_; }
  // The message without the "kolo <code> error: " prefix of what(), for passing the error on.
  const std::string& message() const { return message_; }

 private:
  ErrorCode code_;
  std::string message_;
};

namespace detail {
// "dtype 15": the name of an enum value that its name table lacks (an integer cast to the enum
// without a check), for the enums' name functions, which must not read past their tables. The
// text lives until the process ends.
const char* unnamed_value(const char* kind, int value);

template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace detail

}  // namespace kolo

// Throws kolo::Error(code, "<streamed arguments>").
#define KOLO_THROW(code, ...) throw ::kolo::Error((code), ::kolo::detail::concat(__VA_ARGS__))

// Argument checks: the message names what was wrong; the condition is appended.
#define KOLO_CHECK_ARG(cond, ...)                                              \
  do {                                                                         \
    if (!(cond)) KOLO_THROW(::kolo::ErrorCode::kInvalidArgument, __VA_ARGS__); \
  } while (0)

// Equality check that prints both values, e.g. "count mismatch: 7 vs 8 (a == b)".
#define KOLO_CHECK_EQ(a, b, code, ...)                                                      \
  do {                                                                                      \
    const auto& kolo_a_ = (a);                                                              \
    const auto& kolo_b_ = (b);                                                              \
    if (!(kolo_a_ == kolo_b_))                                                              \
      KOLO_THROW(code, ::kolo::detail::concat(__VA_ARGS__), ": ", kolo_a_, " vs ", kolo_b_, \
                 " (" #a " == " #b ")");                                                    \
  } while (0)

// Invariants that only a kolo bug can break; file:line included.
#define KOLO_ASSERT(cond)                                               \
  do {                                                                  \
    if (!(cond))                                                        \
      KOLO_THROW(::kolo::ErrorCode::kInternal, __FILE__, ":", __LINE__, \
                 ": assertion failed: ", #cond);                        \
  } while (0)

// A failed system call: names the call and errno's text.
#define KOLO_THROW_ERRNO(...)                                                   \
  KOLO_THROW(::kolo::ErrorCode::kIo, ::kolo::detail::concat(__VA_ARGS__), ": ", \
             std::strerror(errno))
