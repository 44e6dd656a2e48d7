// Parsing of kolorun's command line (see kolorun_options.h); the usage text lives here too.
#include "tools/kolorun/kolorun_options.h"

#include <arpa/inet.h>

#include <cstdio>
#include <set>
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
unless set (empty counts as unset): the CPUs kolorun may use divided by N (at least 1), so that
the ranks' math libraries do not each start a thread per CPU. Output lines are prefixed with
"[rank] "; a line longer than 64 KiB is split into several prefixed lines. When a rank fails,
the other ranks are stopped and kolorun exits with the failed rank's exit code, or 128+S if
signal S killed it. If kolorun itself dies (even by SIGKILL), each rank (with --hosts: each
remote shell) gets SIGTERM.

options:
  -np N, -n N   number of ranks on this host (per host with --hosts), in [1, 1024]
  --addr A      IPv4 rendezvous address (default 127.0.0.1; with several hosts: the first
                host's address that the others reach)
  --port P      rendezvous TCP port in [1, 65535] (default: a free port on A; 29500 with
                several hosts)
  --nnodes H    torchrun-style, one kolorun per host: H hosts of -np N ranks each; this host
  --node-rank I   runs ranks I*N .. I*N+N-1; needs --addr, and the same KOLO_SECRET (or
                KOLO_SECRET_FILE) on every host
  --hosts LIST  from one place: host:count,... (the same count on each; -np, if given, must
                be that count), one kolorun per host started through --rsh with
                --nnodes/--node-rank (and --bind, --grace, --no-prefix); rendezvous at the
                first host (an IPv4 address) or --addr; the secret: KOLO_SECRET if set, else
                a fresh one, written to the remote shell's stdin (--secret-stdin), else
                KOLO_SECRET_FILE's absolute path on the command line (the file must be there
                on every host)
  --rsh T       remote-shell template for --hosts, {host} replaced (default "ssh {host}";
                test bed: "scripts/testbed.sh rsh {host}"); like ssh, it must run the words
                after it (shell-quoted by kolorun) through the remote shell, and pass its stdin
                on (the job's secret comes that way: not ssh -n)
  --bind B      none (default), core (each rank its share of the cores: cores / N of them,
                at least one) or numa (rank i on NUMA node i mod nodes, CPUs and memory)
  --topology    print the packages, NUMA nodes, cores and network/GPU devices hwloc finds
                on this host, and exit
  --grace S     seconds between SIGTERM and SIGKILL when stopping ranks (default 5); after a
                rank fails the others first get 1 s to end on their own
  --no-prefix   forward output unchanged, without the "[rank] " prefix
  --secret-stdin  read KOLO_SECRET from the first line of stdin (--hosts uses it, so that the
                secret is on no command line)
  -h, --help    show this help and exit
  --version     show the version and exit
)";

constexpr const char* kOptionList =
    "-np/-n N, --addr A, --port P, --nnodes H, --node-rank I, --hosts LIST, --rsh T, --bind B, "
    "--topology, --grace S, --no-prefix, --secret-stdin, -h/--help, --version";

// "h1:4,h2:4" -> hosts and their (equal) rank count.
int parse_hosts(const std::string& text, std::vector<std::string>* hosts) {
  int count = 0;
  size_t at = 0;
  while (at <= text.size()) {
    size_t comma = text.find(',', at);
    std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    size_t colon = item.rfind(':');
    KOLO_CHECK_ARG(colon != std::string::npos && colon > 0, "--hosts: '", item,
                   "' is not HOST:COUNT (e.g. --hosts 10.0.0.1:4,10.0.0.2:4)");
    const std::string what = "--hosts count of " + item.substr(0, colon);
    int n = static_cast<int>(env::parse_int(item.substr(colon + 1), what.c_str(), 1, kMaxRanks));
    KOLO_CHECK_ARG(count == 0 || n == count, "--hosts: every host needs the same count of ranks ",
                   "(", item, " has ", n, ", the first ", count, ")");
    count = n;
    hosts->push_back(item.substr(0, colon));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  KOLO_CHECK_ARG(hosts->size() >= 1 && static_cast<int>(hosts->size()) <= kMaxRanks,
                 "--hosts: between 1 and 1024 hosts");
  return count;
}

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
  std::set<std::string> given;  // each option once: "-np 2 -np 3" is a mistake, not "3"
  std::string hosts_text;
  int per_host = 0;  // --hosts' count of ranks on each host
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
    const std::string canonical = name == "-n" || name == "--np" ? "-np" : name;
    KOLO_CHECK_ARG(given.insert(canonical).second, "option ", canonical, " is given twice");
    auto value = [&](const char* accepted) -> std::string {
      if (inline_value) return *inline_value;
      KOLO_CHECK_ARG(i + 1 < argc, "option ", name, " needs a value: ", accepted);
      return argv[++i];
    };
    if (name == "-h" || name == "--help") {
      std::fputs(kUsage, stdout);
      return std::nullopt;
    } else if (name == "--topology" && !inline_value) {
      std::fputs(describe_topology().c_str(), stdout);
      return std::nullopt;
    } else if (name == "--bind") {
      opts.bind = parse_bind(value("none, core or numa"));
    } else if (name == "--version") {
      std::printf("kolorun (kolo) %s\n", KOLO_VERSION);
      return std::nullopt;
    } else if (name == "-np" || name == "-n" || name == "--np") {
      opts.np =
          static_cast<int>(env::parse_int(value("an integer in [1, 1024]"), "-np", 1, kMaxRanks));
    } else if (name == "--addr") {
      opts.addr = check_addr(value("an IPv4 address such as 127.0.0.1"));
      opts.addr_given = true;
    } else if (name == "--nnodes") {
      opts.nnodes =
          static_cast<int>(env::parse_int(value("an integer in [1, 1024]"), "--nnodes", 1, 1024));
    } else if (name == "--node-rank") {
      opts.node_rank = static_cast<int>(
          env::parse_int(value("an integer in [0, 1023]"), "--node-rank", 0, 1023));
    } else if (name == "--hosts") {
      hosts_text = value("host:count,...");
      per_host = parse_hosts(hosts_text, &opts.hosts);
    } else if (name == "--rsh") {
      opts.rsh = value("a command template with {host}");
      KOLO_CHECK_ARG(opts.rsh.find("{host}") != std::string::npos, "--rsh '", opts.rsh,
                     "' has no {host} to replace");
    } else if (name == "--port") {
      opts.port =
          static_cast<int>(env::parse_int(value("an integer in [1, 65535]"), "--port", 1, 65535));
    } else if (name == "--grace") {
      opts.grace_s = env::parse_double(value("seconds in [0, 3600]"), "--grace", 0, 3600);
    } else if (name == "--no-prefix" && !inline_value) {
      opts.prefix = false;
    } else if (name == "--secret-stdin" && !inline_value) {
      opts.secret_stdin = true;
    } else {
      KOLO_THROW(ErrorCode::kInvalidArgument, "unknown option '", arg,
                 "'; accepted: ", kOptionList);
    }
  }
  // --hosts counts the ranks itself; -np may repeat that count, in either order, but not
  // change it (which count would the user mean?).
  if (per_host > 0) {
    KOLO_CHECK_ARG(opts.np == 0 || opts.np == per_host, "--hosts ", hosts_text, " gives ", per_host,
                   " ranks per host but -np says ", opts.np,
                   "; give the same count or leave -np out");
    opts.np = per_host;
  }
  KOLO_CHECK_ARG(opts.np > 0, "-np N is required: the number of ranks, an integer in [1, 1024]");
  KOLO_CHECK_ARG(opts.hosts.empty() || opts.nnodes == 1,
                 "--hosts starts one kolorun per host itself: do not also give --nnodes");
  KOLO_CHECK_ARG(opts.node_rank < opts.nnodes, "--node-rank ", opts.node_rank,
                 " is not in [0, --nnodes ", opts.nnodes, ")");
  KOLO_CHECK_ARG(opts.nnodes * opts.np <= kMaxRanks, "--nnodes x -np = ", opts.nnodes * opts.np,
                 " ranks; at most 1024");
  if (opts.nnodes > 1) {
    KOLO_CHECK_ARG(opts.addr_given, "--nnodes ", opts.nnodes,
                   " needs --addr: the address of node 0 (where rank 0 hosts the store) that "
                   "every host reaches");
    if (opts.port == 0) opts.port = kDefaultMultiNodePort;
  }
  if (!opts.hosts.empty()) {
    if (!opts.addr_given) {
      in_addr parsed{};
      KOLO_CHECK_ARG(inet_pton(AF_INET, opts.hosts[0].c_str(), &parsed) == 1,
                     "--hosts: the first host '", opts.hosts[0],
                     "' is not an IPv4 address; give --addr with the address the others reach");
      opts.addr = opts.hosts[0];
    }
    if (opts.port == 0) opts.port = kDefaultMultiNodePort;
  }
  KOLO_CHECK_ARG(i < argc, "missing CMD: the program each rank runs");
  opts.cmd.assign(argv + i, argv + argc);
  opts.cmd.push_back(nullptr);
  return opts;
}

}  // namespace kolo::kolorun
