// allreduce_bw's output on rank 0: the run description, the nccl-tests style table (fixed-width,
// right-aligned columns, one row per size), and the same rows as CSV (--csv) and JSON (--json).
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "benchmarks/bench_case.h"
#include "benchmarks/bench_options.h"
#include "benchmarks/copy_bound.h"

namespace kolo::bench {

// One runner at one size.
struct Measurement {
  std::string unsupported;  // non-empty: did not run, shows "n/a" (the reason goes to the notes)
  double seconds = 0;       // per operation, the slowest rank's
  int64_t wrong = -1;       // wrong elements over all ranks; -1 when not checked
};

struct Row {
  BenchCase c;
  std::string algorithm;  // kolo's algorithm for this size
  Measurement kolo;
  std::vector<Measurement> peers;  // in --compare order
  CopyBound bound;                 // zero without --bound 1
};

struct RunInfo {
  int ranks = 1;
  std::string transport, launcher, version;
};

class Report {
 public:
  // Opens the --csv and --json files (throws UsageError when one cannot be written).
  Report(const Options& options, const RunInfo& info);
  void print_header();
  void add(const Row& row);  // prints the row and records it for the files
  // Average busbw, notes on n/a columns, the JSON file. Returns the wrong elements in all rows.
  int64_t finish();

 private:
  std::string format_row(const Row& row) const;
  void write_csv_row(const Row& row);
  void write_json();
  void open_files();

  Options options_;
  RunInfo info_;
  std::vector<std::pair<std::string, int>> columns_;  // title, width
  std::ofstream csv_, json_;
  std::vector<Row> rows_;
  std::map<std::string, std::string> notes_;  // peer -> why it showed n/a
};

}  // namespace kolo::bench
