// Loading the SpamAssassin corpus: file list, labels, the fixed split and tokenisation.
#include "trainer/data/spam.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "comm/base/error.h"
#include "trainer/data/data_files.h"
#include "trainer/data/mail_text.h"
#include "trainer/io/json_text.h"

namespace kolo::trainer {
namespace {

// "group/name.txt" entries of data/file_list.json, sorted.
std::vector<std::string> list_mails(const std::filesystem::path& root) {
  const std::filesystem::path path = root / "file_list.json";
  const nlohmann::json json = parse_json_or_discarded(
      read_data_file(path, "SpamAssassin file list"), "SpamAssassin file list " + path.string());
  KOLO_CHECK_ARG(json.is_array(), "SpamAssassin file list ", path.string(), " is not a JSON array");
  std::vector<std::string> files;
  for (const auto& entry : json) {
    KOLO_CHECK_ARG(entry.is_string(), "SpamAssassin file list ", path.string(),
                   " holds a non-string entry");
    files.push_back(entry.get<std::string>());
  }
  std::sort(files.begin(), files.end());
  return files;
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
    // One folder down, nothing else: "spam-1/../../x.txt" read a file outside the data folder.
    KOLO_CHECK_ARG(slash != std::string::npos && slash > 0 && file.ends_with(".txt") &&
                       file.find('/', slash + 1) == std::string::npos &&
                       file.find("..") == std::string::npos,
                   "SpamAssassin file list entry \"", file, "\" is not <group>/<id>.txt");
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
  return corpus;
}

}  // namespace kolo::trainer
