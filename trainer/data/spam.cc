// Loading the SpamAssassin corpus: file list, labels, the fixed split and tokenisation.
#include "trainer/data/spam.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

#include "comm/base/error.h"
#include "trainer/data/data_files.h"
#include "trainer/data/mail_text.h"
#include "trainer/io/json_text.h"
#include "trainer/io/message_text.h"

namespace kolo::trainer {
namespace {

// "group/name.txt" entries of data/file_list.json, sorted; each one folder down and listed
// once.
std::vector<std::string> list_mails(const std::filesystem::path& root) {
  const std::filesystem::path path = root / "file_list.json";
  const nlohmann::json json = parse_json(read_data_file(path, "SpamAssassin file list"),
                                         "SpamAssassin file list " + path.string());
  KOLO_CHECK_ARG(json.is_array(), "SpamAssassin file list ", path.string(), " is not a JSON array");
  std::vector<std::string> files;
  for (const auto& entry : json) {
    KOLO_CHECK_ARG(entry.is_string(), "SpamAssassin file list ", path.string(),
                   " holds a non-string entry");
    const std::string& file = entry.get_ref<const std::string&>();
    const size_t slash = file.find('/');
    // One folder down, nothing else: "spam-1/../../x.txt" read a file outside the data folder,
    // and a NUL ends the path the system sees early.
    KOLO_CHECK_ARG(slash != std::string::npos && slash > 0 && file.ends_with(".txt") &&
                       file.find('/', slash + 1) == std::string::npos &&
                       file.find("..") == std::string::npos && file.find('\0') == std::string::npos,
                   "SpamAssassin file list ", path.string(), ": entry \"", printable_text(file),
                   "\" is not <group>/<id>.txt");
    files.push_back(file);
  }
  std::sort(files.begin(), files.end());
  // A mail listed twice trains twice, or sits in both splits (every fifth of a group is test).
  const auto twice = std::adjacent_find(files.begin(), files.end());
  KOLO_CHECK_ARG(twice == files.end(), "SpamAssassin file list ", path.string(), ": entry \"",
                 printable_text(*twice), "\" is listed more than once");
  return files;
}

// The share of the corpus's word pieces that are [UNK] past which the vocabulary is refused. The
// bundled vocabulary leaves well under 1% of the mails' pieces unknown; one that does not fit
// the corpus (another language's, a renamed or truncated list) leaves nearly all of them, and
// the model would train on runs of [UNK] (nothing to mask in pretraining: a loss of 0).
constexpr double kMaxUnknownShare = 0.9;

void check_unknown_share(const SpamCorpus& corpus, const WordPieceTokenizer& tokenizer,
                         const std::filesystem::path& data_dir) {
  const int32_t unk = tokenizer.vocab().unk_id();
  size_t pieces = 0, unknown = 0;
  for (const auto* split : {&corpus.train, &corpus.test})
    for (const Mail& mail : *split) {
      pieces += mail.tokens.size();
      unknown += static_cast<size_t>(std::count(mail.tokens.begin(), mail.tokens.end(), unk));
    }
  const std::string vocab = Vocab::path_in(data_dir).string();
  KOLO_CHECK_ARG(pieces > 0, "the SpamAssassin mails hold no word pieces (vocabulary ", vocab,
                 "): there is nothing to train on");
  const double share = static_cast<double>(unknown) / static_cast<double>(pieces);
  char percent[32];
  std::snprintf(percent, sizeof percent, "%.1f%%", 100 * share);
  KOLO_CHECK_ARG(share <= kMaxUnknownShare, "vocabulary ", vocab, " leaves ", unknown, " of the ",
                 pieces, " word pieces of the SpamAssassin mails [UNK] (", percent,
                 "; at most 90% is accepted): it does not fit the corpus");
}

}  // namespace

int32_t spam_label_of_group(const std::string& group) {
  if (group.starts_with("spam")) return kSpamLabel;
  if (group.find("ham") != std::string::npos) return kHamLabel;
  KOLO_THROW(ErrorCode::kInvalidArgument, "SpamAssassin group \"", group,
             "\" is neither spam-* nor *-ham-*");
}

SpamCorpus load_spam_corpus(const std::filesystem::path& data_dir,
                            const WordPieceTokenizer& tokenizer, const SpamCorpusOptions& options) {
  const std::filesystem::path root = data_dir / "spam-assassin" / "data";
  SpamCorpus corpus;
  std::string group;
  size_t index_in_group = 0;
  for (const std::string& file : list_mails(root)) {
    const size_t slash = file.find('/');
    Mail mail;
    mail.group = file.substr(0, slash);
    mail.name = file.substr(slash + 1, file.size() - slash - 1 - 4);
    mail.label = spam_label_of_group(mail.group);
    index_in_group = mail.group == group ? index_in_group + 1 : 0;
    group = mail.group;
    const std::string raw = read_data_file(root / file, "SpamAssassin mail");
    mail.tokens = tokenizer.tokenize(mail_text(raw), options.max_tokens_per_mail);
    auto& split =
        index_in_group % kSpamTestEvery == kSpamTestEvery - 1 ? corpus.test : corpus.train;
    split.push_back(std::move(mail));
  }
  // A split without both classes trains or scores nothing a spam filter needs.
  for (const auto& [split, name] : {std::pair{&corpus.train, "training"}, {&corpus.test, "test"}}) {
    bool spam = false, ham = false;
    for (const Mail& m : *split) (m.label == kSpamLabel ? spam : ham) = true;
    KOLO_CHECK_ARG(spam && ham, "SpamAssassin file list ", (root / "file_list.json").string(),
                   ": the ", name, " split (", split->size(), " mails) holds ",
                   spam  ? "spam only"
                   : ham ? "ham only"
                         : "no mail",
                   "; every fifth mail of a group is a test mail, and both need spam and ham");
  }
  check_unknown_share(corpus, tokenizer, data_dir);
  return corpus;
}

}  // namespace kolo::trainer
