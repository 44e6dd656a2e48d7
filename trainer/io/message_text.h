// Text from outside the process (file-list entries, file names, a parser's excerpt of its
// input) shown in an error message: it is printed through C strings, so a NUL byte would cut
// the message there, and raw control or non-UTF-8 bytes would reach the terminal as they are.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kolo::trainer {

// `text` with each control character (below 0x20, and 0x7f) and each byte that is not part of
// a well-formed UTF-8 sequence written as \xNN; printable ASCII and UTF-8 characters are kept
// ("spam-1/\x00.txt", "\xff").
std::string printable_text(std::string_view text);

// Bytes of the well-formed UTF-8 sequence at the start of `s` (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF), or 0 when it does not start one (an ASCII byte included).
// The tokenizer's decoder (trainer/data/unicode.h) uses it too.
size_t utf8_sequence(std::string_view s);

}  // namespace kolo::trainer
