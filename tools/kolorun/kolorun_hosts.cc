// The remote command of kolorun --hosts (see kolorun_hosts.h).
#include "tools/kolorun/kolorun_hosts.h"

#include <unistd.h>

#include <optional>
#include <string_view>

#include "comm/base/env.h"
#include "comm/base/text.h"

namespace kolo::kolorun {
namespace {

const char* bind_name(Bind bind) {
  switch (bind) {
    case Bind::kCore: return "core";
    case Bind::kNuma: return "numa";
    case Bind::kNone: break;
  }
  return "none";
}

// A relative KOLO_SECRET_FILE would be looked up in the remote shell's directory (ssh: the home
// directory), not here.
std::string absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

// How the host's kolorun gets the job's secret, which every host must share: KOLO_SECRET (the
// user's, or the fresh one setup() made) on its stdin (--secret-stdin: the launcher writes it
// there, and no command line, local or remote, holds it), else the user's KOLO_SECRET_FILE, by
// absolute path: the file must then be at that path on every host.
std::string secret_assignment() {
  if (env::get("KOLO_SECRET")) return "";
  if (std::optional<std::string> file = env::get("KOLO_SECRET_FILE"))
    return "KOLO_SECRET_FILE=" + absolute(*file);
  return "KOLO_SECRET=";
}

std::string self_path() {
  char self[4096] = {};
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  return n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string("kolorun");
}

}  // namespace

std::vector<std::string> host_command(const Options& opts, int host) {
  std::vector<std::string> words;
  std::string word;
  for (char c : opts.rsh + " ") {
    if (c != ' ') {
      word += c;
    } else if (!word.empty()) {
      for (size_t at; (at = word.find("{host}")) != std::string::npos;)
        word.replace(at, 6, opts.hosts[static_cast<size_t>(host)]);
      words.push_back(word);
      word.clear();
    }
  }
  const std::string secret = secret_assignment();
  std::vector<std::string> tail = {"env",
                                   secret.empty() ? "--" : secret,
                                   self_path(),
                                   "--nnodes",
                                   std::to_string(opts.hosts.size()),
                                   "--node-rank",
                                   std::to_string(host),
                                   "--addr",
                                   opts.addr,
                                   "--port",
                                   std::to_string(opts.port),
                                   "-np",
                                   std::to_string(opts.np),
                                   "--grace",
                                   std::to_string(opts.grace_s)};
  if (secret.empty()) tail.push_back("--secret-stdin");
  if (opts.bind != Bind::kNone) tail.insert(tail.end(), {"--bind", bind_name(opts.bind)});
  if (!opts.prefix) tail.push_back("--no-prefix");
  tail.push_back("--");
  for (char* const* arg = opts.cmd.data(); *arg != nullptr; ++arg) tail.emplace_back(*arg);
  for (const std::string& w : tail) words.push_back(kolo::shell_quote(w));
  return words;
}

}  // namespace kolo::kolorun
