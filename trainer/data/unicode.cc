// Character classes and the uncased fold for the BERT basic tokenizer; see unicode.h for scope.
#include "trainer/data/unicode.h"

#include "trainer/io/message_text.h"

namespace kolo::trainer::unicode {
namespace {

// Base letter of each Latin-1 Supplement (U+00C0..U+00FF) and Latin Extended-A (U+0100..U+017F)
// code point under NFD, lower-cased; '.' where NFD does not decompose it (æ, ø, ß, ł, œ ...),
// which then only gets lower-cased.
constexpr std::string_view kLatinBase =
    "aaaaaa.ceeeeiiii.nooooo..uuuuy.."   // U+00C0
    "aaaaaa.ceeeeiiii.nooooo..uuuuy.y"   // U+00E0
    "aaaaaaccccccccdd..eeeeeeeeeegggg"   // U+0100
    "gggghh..iiiiiiiii...jjkk.llllll."   // U+0120
    "...nnnnnn...oooooo..rrrrrrssssss"   // U+0140
    "sstttt..uuuuuuuuuuuuwwyyyzzzzzz.";  // U+0160

char32_t lower_case(char32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp < 0xC0) return cp;
  if (cp <= 0xDE) return cp == 0xD7 ? cp : cp + 32;  // U+00D7 is the multiplication sign
  if (cp >= 0x100 && cp <= 0x17F) {
    // Latin Extended-A alternates upper/lower in pairs, with the parity flipping twice.
    const bool even_upper = (cp <= 0x137) || (cp >= 0x14A && cp <= 0x177);
    const bool odd_upper = (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E);
    if ((even_upper && cp % 2 == 0) || (odd_upper && cp % 2 == 1)) return cp + 1;
    if (cp == 0x178) return 0xFF;  // Ÿ
    return cp;
  }
  if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 32;  // Greek capitals
  if (cp >= 0x410 && cp <= 0x42F) return cp + 32;                 // Cyrillic А..Я
  if (cp >= 0x400 && cp <= 0x40F) return cp + 80;                 // Cyrillic Ѐ..Џ
  return cp;
}

}  // namespace

char32_t decode_next(std::string_view text, size_t& pos) {
  const unsigned char lead = static_cast<unsigned char>(text[pos]);
  // Overlong forms and surrogates are not valid UTF-8 either: they fall back to Latin-1 too.
  const size_t n = utf8_sequence(text.substr(pos));
  if (n == 0) {
    ++pos;
    return lead;  // ASCII, or an undecodable byte read as Latin-1
  }
  char32_t value = lead & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (size_t i = 1; i < n; ++i)
    value = (value << 6) | (static_cast<unsigned char>(text[pos + i]) & 0x3F);
  pos += n;
  return value;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_whitespace(char32_t cp) {
  return cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool is_control(char32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0xAD || (cp >= 0x200B && cp <= 0x200F) ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2060 && cp <= 0x2064) || cp == 0xFEFF;
}

bool is_punctuation(char32_t cp) {
  // BERT counts every ASCII non-alphanumeric printable as punctuation, symbols ($ + < = > ^ ` |
  // ~) included; outside ASCII only the Unicode punctuation categories count.
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
      (cp >= 123 && cp <= 126))
    return true;
  return cp == 0xA1 || cp == 0xA7 || cp == 0xAB || cp == 0xB6 || cp == 0xB7 || cp == 0xBB ||
         cp == 0xBF || cp == 0x37E || cp == 0x387 || (cp >= 0x2010 && cp <= 0x2027) ||
         (cp >= 0x2030 && cp <= 0x205E) || (cp >= 0x3001 && cp <= 0x3003) ||
         (cp >= 0x3008 && cp <= 0x3011) || (cp >= 0x3014 && cp <= 0x301F) ||
         (cp >= 0xFF01 && cp <= 0xFF0F) || (cp >= 0xFF1A && cp <= 0xFF20) ||
         (cp >= 0xFF3B && cp <= 0xFF40) || (cp >= 0xFF5B && cp <= 0xFF65);
}

bool is_cjk(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

bool is_combining_mark(char32_t cp) {
  return (cp >= 0x300 && cp <= 0x36F) || (cp >= 0x1AB0 && cp <= 0x1AFF) ||
         (cp >= 0x1DC0 && cp <= 0x1DFF) || (cp >= 0x20D0 && cp <= 0x20FF) ||
         (cp >= 0xFE20 && cp <= 0xFE2F);
}

char32_t fold_uncased(char32_t cp) {
  if (cp >= 0xC0 && cp <= 0x17F) {
    const char base = kLatinBase[cp - 0xC0];
    if (base != '.') return static_cast<char32_t>(base);
  }
  return lower_case(cp);
}

}  // namespace kolo::trainer::unicode
