// The tokenizer's Unicode helpers: UTF-8 decoding with the Latin-1 fallback, the uncased fold
// (expected letters from the Unicode charts: NFD base letter, or the lower-case letter where NFD
// does not decompose), and the character classes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "trainer/data/unicode.h"

namespace kolo::trainer {
namespace {

// As uint32_t: gtest cannot print char32_t in C++20.
std::vector<uint32_t> decode_all(const std::string& bytes) {
  std::vector<uint32_t> out;
  for (size_t pos = 0; pos < bytes.size();) out.push_back(unicode::decode_next(bytes, pos));
  return out;
}

TEST(DataUnicode, DecodeUtf8WithLatin1Fallback) {
  EXPECT_EQ(decode_all("a\xC3\xA9"), (std::vector<uint32_t>{'a', 0xE9}));
  EXPECT_EQ(decode_all("\xE2\x82\xAC\xF0\x9F\x98\x80"), (std::vector<uint32_t>{0x20AC, 0x1F600}));
  EXPECT_EQ(decode_all("caf\xE9"), (std::vector<uint32_t>{'c', 'a', 'f', 0xE9}));    // ISO-8859-1
  EXPECT_EQ(decode_all("\xC0\x80"), (std::vector<uint32_t>{0xC0, 0x80}));            // overlong
  EXPECT_EQ(decode_all("\xE2\x82"), (std::vector<uint32_t>{0xE2, 0x82}));            // truncated
  EXPECT_EQ(decode_all("\xED\xA0\x80"), (std::vector<uint32_t>{0xED, 0xA0, 0x80}));  // surrogate
  EXPECT_EQ(decode_all("\xA3"
                       "5"),
            (std::vector<uint32_t>{0xA3, '5'}));  // a lone continuation byte
}

TEST(DataUnicode, AppendUtf8RoundTrips) {
  for (const char32_t cp : {char32_t{'x'}, char32_t{0xE9}, char32_t{0x7FF}, char32_t{0x800},
                            char32_t{0xFFFD}, char32_t{0x10000}, char32_t{0x10FFFF}}) {
    std::string bytes;
    unicode::append_utf8(bytes, cp);
    EXPECT_EQ(decode_all(bytes), std::vector<uint32_t>{cp}) << std::hex << uint32_t{cp};
  }
}

TEST(DataUnicode, FoldUncased) {
  struct Case {
    char32_t in, out;
  };
  const Case cases[] = {
      {'A', 'a'},     {'z', 'z'},       {0xC0, 'a'},      {0xC7, 'c'},     // À Ç
      {0xD1, 'n'},    {0xDD, 'y'},      {0xFF, 'y'},      {0xE9, 'e'},     // Ñ Ý ÿ é
      {0xC6, 0xE6},   {0xD8, 0xF8},     {0xDE, 0xFE},     {0xDF, 0xDF},    // Æ Ø Þ ß
      {0xD7, 0xD7},   {0xF7, 0xF7},     {0x100, 'a'},     {0x10D, 'c'},    // × ÷ Ā č
      {0x110, 0x111}, {0x126, 0x127},   {0x130, 'i'},     {0x131, 0x131},  // Đ Ħ İ ı
      {0x132, 0x133}, {0x13F, 0x140},   {0x141, 0x142},   {0x144, 'n'},    // Ĳ Ŀ Ł ń
      {0x149, 0x149}, {0x14A, 0x14B},   {0x150, 'o'},     {0x152, 0x153},  // ŉ Ŋ Ő Œ
      {0x160, 's'},   {0x166, 0x167},   {0x16F, 'u'},     {0x178, 'y'},    // Š Ŧ ů Ÿ
      {0x17D, 'z'},   {0x17F, 0x17F},   {0x3A3, 0x3C3},   {0x416, 0x436},  // Ž ſ Σ Ж
      {0x401, 0x451}, {0x4E2D, 0x4E2D}, {0x2603, 0x2603},                  // Ё 中 ☃
  };
  for (const Case& c : cases)
    EXPECT_EQ(uint32_t{unicode::fold_uncased(c.in)}, uint32_t{c.out})
        << "U+" << std::hex << uint32_t{c.in};
}

TEST(DataUnicode, CharacterClasses) {
  EXPECT_TRUE(unicode::is_whitespace(0xA0));
  EXPECT_TRUE(unicode::is_whitespace('\n'));
  EXPECT_FALSE(unicode::is_control('\t'));
  EXPECT_TRUE(unicode::is_control(0x7F));
  EXPECT_TRUE(unicode::is_control(0xFEFF));
  EXPECT_TRUE(unicode::is_punctuation('$'));
  EXPECT_TRUE(unicode::is_punctuation('~'));
  EXPECT_TRUE(unicode::is_punctuation(0xBF));    // ¿
  EXPECT_TRUE(unicode::is_punctuation(0x2026));  // …
  EXPECT_FALSE(unicode::is_punctuation(0xA3));   // £ is a currency symbol, not punctuation
  EXPECT_FALSE(unicode::is_punctuation('a'));
  EXPECT_TRUE(unicode::is_cjk(0x4E2D));
  EXPECT_FALSE(unicode::is_cjk(0x3042));  // hiragana is not a CJK ideograph
  EXPECT_TRUE(unicode::is_combining_mark(0x301));
}

}  // namespace
}  // namespace kolo::trainer
