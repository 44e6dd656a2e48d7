// Parsing of kolorun's command line (see kolorun_options.h); the usage text lives here too.
#include "tools/kolorun/kolorun_options.h"

#include <arpa/inet.h>

#include <cstdio>
#include <string>

#include "comm/base/env.h"
#include "comm/base/error.h"

#if __has_include("kolo_config.h")
#include "kolo_config.h"
#endif
#ifndef KOLO_VERSION
#define KOLO_VERSION "unknown"
#endif

namespace kolo::kolorun {
namespace {

constexpr const char* kUsage = R"(usage: kolorun [options] -np N CMD [ARGS...]

Starts N ranks of CMD on this host for a kolo job and waits for them. Each rank gets
KOLO_RANK, KOLO_SIZE, KOLO_LOCAL_RANK, KOLO_LOCAL_SIZE, KOLO_ADDR, KOLO_PORT, KOLO_SECRET
(kept if already set) and KOLO_LAUNCHER=kolorun; and OMP_NUM_THREADS and OPENBLAS_NUM_THREADS
unless set: the CPUs kolorun may use divided by N (at least 1), so that the ranks' math
libraries do not each start a thread per CPU. When a rank fails, the other ranks are stopped
and kolorun exits with the failed rank's exit code, or 128+S if signal S killed it.

options:
  -np N, -n N   number of ranks, an integer in [1, 1024] (required)
  --addr A      IPv4 rendezvous address (default 127.0.0.1)
  --port P      rendezvous TCP port in [1, 65535] (default: a free port on A)
  --grace S     seconds between SIGTERM and SIGKILL when stopping ranks (default 5)
  --no-prefix   forward output lines without the "[rank] " prefix
  -h, --help    show this help and exit
  --version     show the version and exit
)";

constexpr const char* kOptionList =
    "-np/-n N, --addr A, --port P, --grace S, --no-prefix, -h/--help, --version";

std::string check_addr(const std::string& addr) {
  in_addr parsed{};
  KOLO_CHECK_ARG(inet_pton(AF_INET, addr.c_str(), &parsed) == 1, "--addr='", addr,
                 "' is not accepted; expected an IPv4 address such as 127.0.0.1");
  return addr;
}

}  // namespace

// Options come first; the first argument that is not an option (or the one after "--") starts
// CMD, so CMD's own flags are never taken for kolorun's.
std::optional<Options> parse_options(int argc, char** argv) {
  Options opts;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i], name = arg;
    std::optional<std::string> inline_value;  // from --name=value
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;
    if (size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    auto value = [&](const char* accepted) -> std::string {
      if (inline_value) return *inline_value;
      KOLO_CHECK_ARG(i + 1 < argc, "option ", name, " needs a value: ", accepted);
      return argv[++i];
    };
    if (name == "-h" || name == "--help") {
      std::fputs(kUsage, stdout);
      return std::nullopt;
    } else if (name == "--version") {
      std::printf("kolorun (kolo) %s\n", KOLO_VERSION);
      return std::nullopt;
    } else if (name == "-np" || name == "-n" || name == "--np") {
      opts.np =
          static_cast<int>(env::parse_int(value("an integer in [1, 1024]"), "-np", 1, kMaxRanks));
    } else if (name == "--addr") {
      opts.addr = check_addr(value("an IPv4 address such as 127.0.0.1"));
    } else if (name == "--port") {
      opts.port =
          static_cast<int>(env::parse_int(value("an integer in [1, 65535]"), "--port", 1, 65535));
    } else if (name == "--grace") {
      opts.grace_s = env::parse_double(value("seconds in [0, 3600]"), "--grace", 0, 3600);
    } else if (name == "--no-prefix" && !inline_value) {
      opts.prefix = false;
    } else {
      KOLO_THROW(ErrorCode::kInvalidArgument, "unknown option '", arg,
                 "'; accepted: ", kOptionList);
    }
  }
  KOLO_CHECK_ARG(opts.np > 0, "-np N is required: the number of ranks, an integer in [1, 1024]");
  KOLO_CHECK_ARG(i < argc, "missing CMD: the program each rank runs");
  opts.cmd.assign(argv + i, argv + argc);
  opts.cmd.push_back(nullptr);
  return opts;
}

}  // namespace kolo::kolorun
