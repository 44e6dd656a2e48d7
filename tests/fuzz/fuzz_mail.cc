// Fuzz target: the mail cleanup of the trainer's spam data (trainer/data/mail_text.h) on
// arbitrary bytes, as the corpus's .txt files hold them. Run: scripts/fuzz.sh fuzz_mail 60.
// It must not fail or crash on any input, stay linear in time (libFuzzer's -timeout catches a
// quadratic case), and give "<subject>\n<from>\n<body>": two lines and a body.
#include <cstdint>
#include <string>
#include <string_view>

#include "tests/fuzz/fuzz_util.h"
#include "trainer/data/mail_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  const std::string text = kolo::trainer::mail_text(raw);
  const size_t subject_end = text.find('\n');
  FUZZ_CHECK(subject_end != std::string::npos);
  FUZZ_CHECK(text.find('\n', subject_end + 1) != std::string::npos);
  // The body alone, quoted-printable and not: the same cleanup the corpus's bodies get.
  (void)kolo::trainer::mail::clean_body(raw, size > 0 && data[0] % 2 == 1);
  return 0;
}
