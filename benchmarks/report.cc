// Table, CSV and JSON output of allreduce_bw. Bandwidths are in GB/s (1e9 bytes per second):
// algbw = size / time, busbw = algbw * the collective's bus factor (see bus_factor()).
#include "benchmarks/report.h"
#include "comm/base/algorithm.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "comm/base/error.h"

namespace kolo::bench {
namespace {

std::string fixed(double value, int decimals = 2) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", decimals, value);
  return text;
}

double algbw(const BenchCase& c, const Measurement& m) {
  return c.bytes / m.seconds / 1e9;
}
double busbw(const BenchCase& c, const Measurement& m) {
  return algbw(c, m) * bus_factor(c.coll, c.nranks);
}
// kolo's busbw as a fraction of the copy bound.
double bound_fraction(const Row& row) {
  return row.bound.best() > 0 ? busbw(row.c, row.kolo) / row.bound.best() : 0;
}
const char* redop_name(const BenchCase& c) {
  return reduces(c.coll) ? op_name(c.op) : "none";
}
std::string wrong_text(int64_t wrong) {
  return wrong < 0 ? "N/A" : std::to_string(wrong);
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// A write that failed (a full disk, /dev/full) ends the run naming the file, once every row has
// run and been printed: the figures were lost while the run said nothing and exited 0.
void check_written(std::ofstream& out, const char* flag, const std::string& path) {
  if (out) return;
  const int error = errno;
  KOLO_THROW(ErrorCode::kIo, flag, ": writing '", path, "' failed",
             error != 0 ? std::string(": ") + std::strerror(error) : std::string());
}

nlohmann::ordered_json measurement_json(const BenchCase& c, const Measurement& m,
                                        const Measurement* kolo) {
  nlohmann::ordered_json j;
  if (!m.unsupported.empty()) {
    j["na"] = m.unsupported;
    return j;
  }
  j["time_us"] = m.seconds * 1e6;
  j["algbw"] = algbw(c, m);
  j["busbw"] = busbw(c, m);
  if (kolo) j["ratio"] = m.seconds / kolo->seconds;
  j["wrong"] = m.wrong < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(m.wrong);
  return j;
}

}  // namespace

Report::Report(const Options& options, const RunInfo& info) : options_(options), info_(info) {
  columns_ = {{"size(B)", 12}, {"count", 12}, {"type", 9}, {"redop", 6}};
  if (options_.algorithm == Algorithm::kAuto) columns_.push_back({"algo", 17});
  columns_.insert(columns_.end(),
                  {{"time(us)", 10}, {"algbw(GB/s)", 12}, {"busbw(GB/s)", 12}, {"#wrong", 7}});
  for (const std::string& peer : options_.compare) {
    const int width = std::max<int>(12, static_cast<int>(peer.size()) + 10);
    columns_.insert(columns_.end(),
                    {{peer + "_time(us)", width}, {peer + "_busbw", width - 2}, {"ratio", 8}});
  }
  if (options_.bound) columns_.insert(columns_.end(), {{"bound(GB/s)", 12}, {"%bound", 7}});
  open_files();
}

void Report::open_files() {
  if (!options_.csv_path.empty() && !options_.json_path.empty()) {
    std::error_code ignored;
    // Absolute first: "F" and "./F" of a file not made yet resolved apart.
    const auto csv = std::filesystem::weakly_canonical(
        std::filesystem::absolute(options_.csv_path, ignored), ignored);
    const auto json = std::filesystem::weakly_canonical(
        std::filesystem::absolute(options_.json_path, ignored), ignored);
    if (csv == json)  // the JSON, written at the end, replaced the CSV
      throw UsageError(2, "--csv and --json name the same file '" + options_.json_path + "'");
  }
  if (!options_.csv_path.empty()) {
    csv_.open(options_.csv_path, std::ios::trunc);
    if (!csv_) throw UsageError(2, "--csv: cannot write '" + options_.csv_path + "'");
    csv_ << "size,count,type,redop,algorithm,time_us,algbw_gbps,busbw_gbps,wrong";
    for (const std::string& p : options_.compare)
      csv_ << ',' << p << "_time_us," << p << "_busbw_gbps," << p << "_ratio," << p << "_wrong";
    if (options_.bound) csv_ << ",bound_gbps,bound_fraction";
    csv_ << '\n';
  }
  if (!options_.json_path.empty()) {
    json_.open(options_.json_path, std::ios::trunc);
    if (!json_) throw UsageError(2, "--json: cannot write '" + options_.json_path + "'");
  }
}

void Report::print_header() {
  const Options& o = options_;
  std::printf("# kolo %s allreduce_bw: %s, ranks %d, transport %s, launcher %s\n",
              info_.version.c_str(), collective_name(o.coll), info_.ranks, info_.transport.c_str(),
              info_.launcher.c_str());
  std::printf("# dtype %s, op %s, algo %s, sizes %zu..%zu B x%zu, iters %d, warmup %d, check %d",
              dtype_name(o.dtype), reduces(o.coll) ? op_name(o.op) : "none",
              algorithm_name(o.algorithm), o.min_bytes, o.max_bytes, o.step_factor, o.iters,
              o.warmup_iters, o.check ? 1 : 0);
  if (o.in_place) std::printf(", in place");
  if (o.shared_buffers) std::printf(", alloc_shared buffers");
  std::printf(o.compare.empty() ? "\n" : ", compare %s\n", join(o.compare, ",").c_str());
  std::printf(
      "# time: slowest rank's per operation; ratio = peer time / kolo time (>1: kolo "
      "faster)\n#\n");
  std::string line;
  for (size_t i = 0; i < columns_.size(); ++i) {
    char cell[64];
    std::snprintf(cell, sizeof(cell), "%*s", columns_[i].second, columns_[i].first.c_str());
    line += (i ? " " : "") + std::string(cell);
  }
  line[0] = '#';
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

std::string Report::format_row(const Row& row) const {
  const BenchCase& c = row.c;
  std::vector<std::string> cells = {std::to_string(c.bytes), std::to_string(c.count),
                                    dtype_name(c.dtype), redop_name(c)};
  if (options_.algorithm == Algorithm::kAuto) cells.push_back(row.algorithm);
  cells.insert(cells.end(), {fixed(row.kolo.seconds * 1e6), fixed(algbw(c, row.kolo)),
                             fixed(busbw(c, row.kolo)), wrong_text(row.kolo.wrong)});
  for (const Measurement& m : row.peers) {
    if (!m.unsupported.empty()) {
      cells.insert(cells.end(), {"n/a", "n/a", "n/a"});
      continue;
    }
    cells.insert(cells.end(),
                 {fixed(m.seconds * 1e6), fixed(busbw(c, m)), fixed(m.seconds / row.kolo.seconds)});
  }
  if (options_.bound)
    cells.insert(cells.end(), {fixed(row.bound.best()), fixed(100 * bound_fraction(row), 0) + "%"});
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    char cell[96];
    std::snprintf(cell, sizeof(cell), "%*s", columns_[i].second, cells[i].c_str());
    line += (i ? " " : "") + std::string(cell);
  }
  return line;
}

void Report::write_csv_row(const Row& row) {
  const BenchCase& c = row.c;
  auto wrong = [](int64_t w) { return w < 0 ? std::string() : std::to_string(w); };
  csv_ << c.bytes << ',' << c.count << ',' << dtype_name(c.dtype) << ',' << redop_name(c) << ','
       << row.algorithm << ',' << fixed(row.kolo.seconds * 1e6, 3) << ','
       << fixed(algbw(c, row.kolo), 4) << ',' << fixed(busbw(c, row.kolo), 4) << ','
       << wrong(row.kolo.wrong);
  for (const Measurement& m : row.peers) {
    if (!m.unsupported.empty()) {
      csv_ << ",,,,";
      continue;
    }
    csv_ << ',' << fixed(m.seconds * 1e6, 3) << ',' << fixed(busbw(c, m), 4) << ','
         << fixed(m.seconds / row.kolo.seconds, 4) << ',' << wrong(m.wrong);
  }
  if (options_.bound)
    csv_ << ',' << fixed(row.bound.best(), 4) << ',' << fixed(bound_fraction(row), 4);
  csv_ << '\n' << std::flush;  // a failed write is reported by finish(), after every row ran
}

void Report::add(const Row& row) {
  std::printf("%s\n", format_row(row).c_str());
  std::fflush(stdout);
  for (size_t i = 0; i < row.peers.size(); ++i)
    if (!row.peers[i].unsupported.empty()) notes_[options_.compare[i]] = row.peers[i].unsupported;
  if (csv_.is_open()) write_csv_row(row);
  rows_.push_back(row);
}

void Report::write_json() {
  nlohmann::ordered_json j;
  j["benchmark"] = "allreduce_bw";
  j["kolo_version"] = info_.version;
  j["ranks"] = info_.ranks;
  j["transport"] = info_.transport;
  j["launcher"] = info_.launcher;
  j["collective"] = collective_name(options_.coll);
  j["dtype"] = dtype_name(options_.dtype);
  j["op"] = reduces(options_.coll) ? op_name(options_.op) : "none";
  j["algorithm"] = algorithm_name(options_.algorithm);
  j["iters"] = options_.iters;
  j["warmup_iters"] = options_.warmup_iters;
  j["check"] = options_.check;
  j["compare"] = options_.compare;
  j["min_bytes"] = options_.min_bytes;
  j["max_bytes"] = options_.max_bytes;
  j["step_factor"] = options_.step_factor;
  j["in_place"] = options_.in_place;
  j["alloc"] = options_.shared_buffers ? "shared" : "private";
  j["bound"] = options_.bound;
  j["rows"] = nlohmann::ordered_json::array();
  for (const Row& row : rows_) {
    nlohmann::ordered_json r = {{"size", row.c.bytes},
                                {"count", row.c.count},
                                {"type", dtype_name(row.c.dtype)},
                                {"redop", redop_name(row.c)},
                                {"algorithm", row.algorithm}};
    r["kolo"] = measurement_json(row.c, row.kolo, nullptr);
    for (size_t i = 0; i < row.peers.size(); ++i)
      r[options_.compare[i]] = measurement_json(row.c, row.peers[i], &row.kolo);
    if (options_.bound)
      r["bound"] = {{"gbps", row.bound.best()},
                    {"memcpy_gbps", row.bound.memcpy_gbps},
                    {"stream_gbps", row.bound.stream_gbps},
                    {"fraction", bound_fraction(row)}};
    j["rows"].push_back(r);
  }
  json_ << j.dump(1) << '\n' << std::flush;
  check_written(json_, "--json", options_.json_path);
}

int64_t Report::finish() {
  double sum = 0;
  int64_t wrong = 0;
  std::vector<std::string> peer_wrong;
  for (const Row& row : rows_) {
    sum += busbw(row.c, row.kolo);
    wrong += std::max<int64_t>(row.kolo.wrong, 0);
    for (size_t i = 0; i < row.peers.size(); ++i) {
      if (row.peers[i].wrong <= 0) continue;
      wrong += row.peers[i].wrong;
      peer_wrong.push_back(options_.compare[i] + " at " + std::to_string(row.c.bytes) + " B");
    }
  }
  for (const auto& [peer, why] : notes_) std::printf("# %s: n/a (%s)\n", peer.c_str(), why.c_str());
  if (!peer_wrong.empty())
    std::printf("# baseline results wrong: %s\n", join(peer_wrong, ", ").c_str());
  if (options_.check)
    std::printf("# #wrong in all rows: %lld, %s\n", static_cast<long long>(wrong),
                wrong == 0 ? "OK" : "FAILED");
  else
    std::printf("# #wrong: not checked (-c 0)\n");
  std::printf("# average kolo busbw: %s GB/s\n",
              fixed(rows_.empty() ? 0 : sum / static_cast<double>(rows_.size()), 3).c_str());
  if (options_.bound)
    std::printf(
        "# bound: per row, the rate at which one rank copies a buffer of the row's size while "
        "every rank copies its own (the faster of memcpy and a streaming-store copy, the slowest "
        "rank's); %%bound = kolo busbw / bound\n");
  if (csv_.is_open()) check_written(csv_, "--csv", options_.csv_path);
  if (json_.is_open()) write_json();
  return wrong;
}

}  // namespace kolo::bench
