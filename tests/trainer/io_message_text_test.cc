// printable_text: outside text in error messages keeps UTF-8 and printable ASCII, and escapes
// what would cut the message (NUL) or reach the terminal raw (control and invalid bytes).
#include <gtest/gtest.h>

#include <string>

#include "trainer/io/message_text.h"

namespace kolo::trainer {
namespace {

TEST(IoMessageText, EscapesNulControlAndInvalidBytes) {
  using namespace std::string_literals;
  EXPECT_EQ(printable_text("spam-1/0.txt"), "spam-1/0.txt");
  EXPECT_EQ(printable_text("spam-1/\0.txt"s), "spam-1/\\x00.txt");
  EXPECT_EQ(printable_text("a\nb\x7f"), "a\\x0ab\\x7f");
  EXPECT_EQ(printable_text("caf\xc3\xa9 \xe2\x96\x81"), "caf\xc3\xa9 \xe2\x96\x81");  // é, ▁
  EXPECT_EQ(printable_text("\"\xff\""), "\"\\xff\"");
  // Truncated, overlong and surrogate sequences are not UTF-8: each byte is escaped.
  EXPECT_EQ(printable_text("\xc3"), "\\xc3");
  EXPECT_EQ(printable_text("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(printable_text("\xed\xa0\x80"), "\\xed\\xa0\\x80");
}

}  // namespace
}  // namespace kolo::trainer
