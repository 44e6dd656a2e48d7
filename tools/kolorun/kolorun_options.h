// kolorun's command line: `kolorun [options] -np N CMD [ARGS...]` parsed into Options.
// Bad input raises kolo::Error (kInvalidArgument) naming the option and its accepted values.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tools/kolorun/kolorun_topology.h"

namespace kolo::kolorun {

inline constexpr int kMaxRanks = 1024;

inline constexpr int kDefaultMultiNodePort = 29500;

struct Options {
  int np = 0;  // ranks on this host (per host with --hosts)
  std::string addr = "127.0.0.1";
  bool addr_given = false;
  int port = 0;  // 0: find a free one (one host), kDefaultMultiNodePort (several)
  // torchrun-style, one kolorun per host: ranks node_rank * np ... of nnodes * np.
  int nnodes = 1, node_rank = 0;
  // From one place: a kolorun per host started through the remote-shell template.
  std::vector<std::string> hosts;
  std::string rsh = "ssh {host}";
  Bind bind = Bind::kNone;
  double grace_s = 5.0;
  bool prefix = true;
  // --secret-stdin: KOLO_SECRET is the first line of stdin (how --hosts hands each host's
  // kolorun the job's secret, off every command line).
  bool secret_stdin = false;
  std::vector<char*> cmd;  // CMD and its arguments, null-terminated for execvp
};

// nullopt: -h/--help, --version or --topology was asked for and printed on stdout.
std::optional<Options> parse_options(int argc, char** argv);

}  // namespace kolo::kolorun
