// allreduce_bw's command line (nccl-tests style flags, parsed with CLI11). A bad value is a
// UsageError whose message names the flag and what it accepts; main() exits 2 with it.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "benchmarks/bench_case.h"
#include "comm/base/algorithm.h"
#include "comm/base/dtype.h"
#include "comm/base/reduce_op.h"
#include "comm/base/transport_kind.h"

namespace kolo::bench {

// exit_code 0 carries the --help text; 2 a bad flag or a baseline that cannot run here.
class UsageError : public std::runtime_error {
 public:
  UsageError(int exit_code, const std::string& text)
      : std::runtime_error(text), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

struct Options {
  size_t min_bytes = 8;
  size_t max_bytes = size_t{256} << 20;
  size_t step_factor = 2;
  int iters = 20;
  int warmup_iters = 5;
  bool check = true;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  Collective coll = Collective::kAllreduce;
  Algorithm algorithm = Algorithm::kAuto;
  TransportKind transport = TransportKind::kAuto;
  std::vector<std::string> compare;  // "mpi", "gloo", in the order given
  bool in_place = false;             // --inplace 1: allreduce or allgather, as MPI_IN_PLACE
  bool shared_buffers = false;       // --alloc shared: buffers from kolo::alloc_shared
  bool bound = true;                 // --bound 1: the copy bound per row (copy_bound.h)
  std::string csv_path, json_path;
};

Options parse_options(int argc, char** argv);

// A kolo::Error's message without its "kolo <code> error: " lead, for flag messages.
std::string error_text(const std::exception& e);

// The sizes to run: min_bytes, then multiplied by step_factor while not above max_bytes.
std::vector<size_t> size_steps(const Options& options);

// "8", "64K", "256M", "1G" (powers of 1024), below 2^62; anything else throws a UsageError
// naming the flag.
size_t parse_bytes(const std::string& text, const std::string& flag);

}  // namespace kolo::bench
