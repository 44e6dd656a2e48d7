// kolorun's command line: `kolorun [options] -np N CMD [ARGS...]` parsed into Options.
// Bad input raises kolo::Error (kInvalidArgument) naming the option and its accepted values.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kolo::kolorun {

inline constexpr int kMaxRanks = 1024;

struct Options {
  int np = 0;
  std::string addr = "127.0.0.1";
  int port = 0;  // 0: find a free one
  double grace_s = 5.0;
  bool prefix = true;
  std::vector<char*> cmd;  // CMD and its arguments, null-terminated for execvp
};

// nullopt: -h/--help or --version was asked for and printed on stdout.
std::optional<Options> parse_options(int argc, char** argv);

}  // namespace kolo::kolorun
