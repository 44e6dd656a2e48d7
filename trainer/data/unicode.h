// The few Unicode facts the BERT basic tokenizer needs: UTF-8 decoding that tolerates the raw
// 8-bit mails of the corpus, character classes (whitespace, control, punctuation, CJK) and an
// uncased fold (lower-case + accent strip) for ASCII, Latin-1, Latin Extended-A, Greek and
// Cyrillic. Other code points pass through unchanged; docs/data.md lists what is covered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kolo::trainer::unicode {

inline constexpr char32_t kReplacement = 0xFFFD;

// Decodes the code point starting at text[pos] and advances pos past it. A byte that does not
// start a valid UTF-8 sequence is taken as a Latin-1 character (so a mail written in ISO-8859-1
// keeps its "£" and "é"); the mail corpus holds both encodings.
char32_t decode_next(std::string_view text, size_t& pos);

void append_utf8(std::string& out, char32_t cp);

bool is_whitespace(char32_t cp);   // space, \t \n \r and the Unicode space separators
bool is_control(char32_t cp);      // Cc and common Cf characters, except \t \n \r
bool is_punctuation(char32_t cp);  // all ASCII non-alphanumeric printables + Unicode P* blocks
bool is_cjk(char32_t cp);          // CJK ideographs (the ranges BERT splits one per token)
bool is_combining_mark(char32_t cp);

// Lower-cases and strips accents (what NFD followed by dropping combining marks gives) for the
// scripts listed above; returns cp unchanged elsewhere.
char32_t fold_uncased(char32_t cp);

}  // namespace kolo::trainer::unicode
