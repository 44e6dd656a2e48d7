// How every kolo program with CLI11 flags (examples/, benchmarks/) answers its command line:
// --help (and --version) print and exit 0; a bad flag prints "PROGRAM: what is wrong (see
// PROGRAM --help)" on stderr and exits 2, the usage status of kolorun, kolo_ckpt and
// allreduce_bw (CLI11's own macro exited 105 or 109, with no program name). Header only: the
// library itself does not use CLI11. Errors after parsing exit 1 (kt::run_program).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

namespace kolo::cli {

constexpr int kExitUsage = 2;

// For path options: "" (an unset shell variable) is refused naming the option, not taken as
// "not given" or as the current folder (--config "" ran without a config file, --save "" did not
// save, a fresh run into an earlier run's --save folder replaced its checkpoints).
inline CLI::Validator non_empty_path() {
  return CLI::Validator(
      [](std::string& s) { return s.empty() ? std::string("the path is empty") : ""; }, "");
}

// -1: parsed, run on; otherwise the exit status to return from main().
inline int parse_flags(CLI::App& app, int argc, char** argv, const char* program) {
  try {
    app.parse(argc, argv);
    return -1;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::string what = e.what();
    if (what.empty()) what = e.get_name();
    std::fprintf(stderr, "%s: %s (see %s --help)\n", program, what.c_str(), program);
    return kExitUsage;
  }
}

}  // namespace kolo::cli

// In main(): returns from it on --help or a bad flag.
#define KOLO_PARSE_FLAGS(app, argc, argv, program)                                  \
  do {                                                                              \
    const int kolo_parse_status = kolo::cli::parse_flags(app, argc, argv, program); \
    if (kolo_parse_status >= 0) return kolo_parse_status;                           \
  } while (0)
