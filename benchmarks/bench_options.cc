// allreduce_bw's flags. Values are taken as text and converted here, so that every error names
// its flag and what the flag accepts, in one format.
#include "benchmarks/bench_options.h"

#include <CLI/CLI.hpp>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <limits>

#include "comm/base/algorithm.h"
#include "comm/base/error.h"

namespace kolo::bench {
namespace {

[[noreturn]] void bad_flag(const std::string& flag, const std::string& text,
                           const std::string& accepted) {
  throw UsageError(2, flag + ": '" + text + "' is not accepted; expected " + accepted);
}

long long parse_int(const std::string& text, const std::string& flag, long long lo, long long hi) {
  const std::string accepted =
      "an integer from " + std::to_string(lo) +
      (hi == std::numeric_limits<int>::max() ? " up" : " to " + std::to_string(hi));
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < lo || value > hi)
    bad_flag(flag, text, accepted);
  return value;
}

// Converts with one of kolo's parsers; their message already lists the accepted names.
template <typename Parse>
auto parse_kolo(Parse parse, const std::string& text, const std::string& flag) {
  try {
    return parse(text, flag);
  } catch (const kolo::Error& e) {
    throw UsageError(2, error_text(e));  // "<flag>='x' is not a valid ...; accepted: ..."
  }
}

std::vector<std::string> parse_compare(const std::vector<std::string>& items) {
  std::vector<std::string> peers;
  for (const std::string& item : items) {
    if (item.empty()) continue;
    if (item != "mpi" && item != "gloo") bad_flag("--compare", item, "a comma list of mpi, gloo");
    bool seen = false;
    for (const std::string& p : peers) seen = seen || p == item;
    if (!seen) peers.push_back(item);
  }
  return peers;
}

struct RawFlags {
  std::string min_bytes = "8", max_bytes = "256M", step_factor = "2", iters = "20", warmup = "5";
  std::string check = "1", dtype = "float32", op = "sum", coll = "allreduce", algo = "auto";
  std::string transport = "auto", csv, json, inplace = "0", alloc = "malloc";
  std::string bound = "1";
  std::vector<std::string> compare;
  bool op_given = false;  // -o on the command line (the default applies only where it reduces)
};

void add_flags(CLI::App& app, RawFlags& raw) {
  auto flag = [&app](const char* names, std::string& value, const char* type, const char* help) {
    app.add_option(names, value, help)->type_name(type)->capture_default_str();
  };
  flag("-b,--minbytes", raw.min_bytes, "BYTES", "smallest size (K/M/G suffixes: powers of 1024)");
  flag("-e,--maxbytes", raw.max_bytes, "BYTES", "largest size (K/M/G suffixes)");
  flag("-f,--stepfactor", raw.step_factor, "N", "multiply the size by N per step");
  flag("-n,--iters", raw.iters, "N", "timed iterations per size");
  flag("-w,--warmup_iters", raw.warmup, "N", "untimed iterations before them");
  flag("-c,--check", raw.check, "0|1", "1: check results and count #wrong");
  flag("-d,--datatype", raw.dtype, "DTYPE",
       "float32 float64 float16 bfloat16 int32 int64 uint8 int8 int16");
  flag("-o,--op", raw.op, "OP",
       "sum avg min max prod band bor bxor (the last three: integers); allreduce and "
       "reduce_scatter only");
  flag("--coll", raw.coll, "COLL", "allreduce reduce_scatter allgather broadcast alltoall");
  flag("--algo", raw.algo, "ALGO", "auto ring tree halving_doubling (and kolo's others)");
  flag("--transport", raw.transport, "KIND",
       "auto shm tcp mpi ucx (mpi and ucx: builds with them)");
  app.add_option("--compare", raw.compare, "baselines in the same run: mpi,gloo")
      ->type_name("LIST")
      ->delimiter(',');
  flag("--inplace", raw.inplace, "0|1",
       "1: allreduce or allgather in place (MPI_IN_PLACE for MPI)");
  flag("--alloc", raw.alloc, "KIND", "malloc, or shared: kolo::alloc_shared buffers");
  flag("--bound", raw.bound, "0|1",
       "1: per row, the copy rate of a buffer of its size with every rank copying (bound and "
       "%bound columns)");
  flag("--csv", raw.csv, "FILE", "also write every row to FILE as CSV");
  flag("--json", raw.json, "FILE", "also write the run and every row to FILE as JSON");
}

Options convert(const RawFlags& raw) {
  Options o;
  o.min_bytes = parse_bytes(raw.min_bytes, "-b/--minbytes");
  o.max_bytes = parse_bytes(raw.max_bytes, "-e/--maxbytes");
  if (o.min_bytes > o.max_bytes)
    bad_flag("-b/--minbytes", raw.min_bytes,
             "a size no larger than -e/--maxbytes (" + raw.max_bytes +
                 "); -b is 8 where it is not given");
  const int kMax = std::numeric_limits<int>::max();
  o.step_factor = static_cast<size_t>(parse_int(raw.step_factor, "-f/--stepfactor", 2, 1024));
  o.iters = static_cast<int>(parse_int(raw.iters, "-n/--iters", 1, kMax));
  o.warmup_iters = static_cast<int>(parse_int(raw.warmup, "-w/--warmup_iters", 0, kMax));
  o.check = parse_int(raw.check, "-c/--check", 0, 1) == 1;
  o.dtype = parse_kolo(parse_dtype, raw.dtype, "-d/--datatype");
  auto coll = parse_collective(raw.coll);
  if (!coll) bad_flag("--coll", raw.coll, std::string("one of ") + kCollectiveNames);
  o.coll = *coll;
  o.op = parse_kolo(parse_op, raw.op, "-o/--op");
  if (raw.op_given && !reduces(o.coll))
    bad_flag(
        "-o/--op", raw.op,
        std::string("no -o/--op with --coll ") + collective_name(o.coll) + " (it does not reduce)");
  if (!op_takes(o.op, o.dtype))
    bad_flag("-o/--op", raw.op,
             std::string("an op that ") + dtype_name(o.dtype) +
                 " takes (band, bor and bxor need an integer -d/--datatype)");
  o.algorithm = parse_kolo(parse_algorithm, raw.algo, "--algo");
  o.transport = parse_kolo(parse_transport, raw.transport, "--transport");
  o.compare = parse_compare(raw.compare);
  o.in_place = parse_int(raw.inplace, "--inplace", 0, 1) == 1;
  if (o.in_place && o.coll != Collective::kAllgather && o.coll != Collective::kAllreduce)
    bad_flag("--inplace", raw.inplace, "0 unless --coll allreduce or allgather");
  if (raw.alloc != "malloc" && raw.alloc != "shared")
    bad_flag("--alloc", raw.alloc, "malloc or shared");
  o.shared_buffers = raw.alloc == "shared";
  o.bound = parse_int(raw.bound, "--bound", 0, 1) == 1;
  o.csv_path = raw.csv;
  o.json_path = raw.json;
  return o;
}

}  // namespace

std::string error_text(const std::exception& e) {
  const std::string text = e.what();
  const size_t lead = text.find(" error: ");
  if (text.rfind("kolo ", 0) != 0 || lead == std::string::npos) return text;
  return text.substr(lead + 8);
}

size_t parse_bytes(const std::string& text, const std::string& flag) {
  const std::string accepted =
      "a byte count below 2^62 with an optional K, M or G suffix (powers of 1024)";
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  // 19 digits fit std::stoull; the bound below decides.
  if (digits == 0 || digits > 19 || text.size() - digits > 1) bad_flag(flag, text, accepted);
  const size_t value = std::stoull(text.substr(0, digits));
  int shift = 0;
  if (digits < text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text.back()))) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      default: bad_flag(flag, text, accepted);
    }
  }
  // Checked before the shift, which would drop the high bits (2^34 G wrapped to 0). The bound
  // leaves room for the sums made of a size later (page rounding, two buffers per local rank).
  if (value >= (size_t{1} << (62 - shift))) bad_flag(flag, text, accepted);
  return value << shift;
}

std::vector<size_t> size_steps(const Options& options) {
  std::vector<size_t> sizes;
  for (size_t s = options.min_bytes; s <= options.max_bytes; s *= options.step_factor) {
    sizes.push_back(s);
    if (s == 0 || s > options.max_bytes / options.step_factor) break;
  }
  return sizes;
}

Options parse_options(int argc, char** argv) {
  CLI::App app{
      "kolo bandwidth benchmark: time a collective over a range of sizes (nccl-tests "
      "columns), optionally next to MPI and Gloo on the same buffers.",
      "allreduce_bw"};
  RawFlags raw;
  add_flags(app, raw);
  try {
    app.parse(argc, argv);
    raw.op_given = app.count("--op") > 0;
  } catch (const CLI::CallForHelp&) {
    throw UsageError(0, app.help());
  } catch (const CLI::ParseError& e) {
    throw UsageError(2, std::string(e.what()) + "\nRun with --help for the flags.");
  }
  return convert(raw);
}

}  // namespace kolo::bench
