// The collective sweep: every collective x dtype x op x size on one Communicator, each result
// checked against the closed forms of values.h and, where all ranks must agree, compared
// across ranks bit for bit. Used by the thread-rank gtest and by the multi-process program
// (tests/sweep_main.cc) under kolorun, mpirun and torchrun-style launches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace kolo::testing {

struct SweepConfig {
  // Element counts: of each rank's input for allreduce, allgather(v) and broadcast, of each
  // rank's output for reduce_scatter, and of each rank's whole send buffer for alltoall(v)
  // (ceil(count / size) per peer).
  std::vector<size_t> sizes{0, 1, 7, 1000, (size_t{1} << 20) + 3};
  std::vector<DType> dtypes{DType::kFloat32,  DType::kFloat64, DType::kFloat16,
                            DType::kBFloat16, DType::kInt32,   DType::kInt64,
                            DType::kUInt8,    DType::kInt8,    DType::kInt16};
  // The bitwise ops run with int32 at every size and uint8 up to 1000 elements.
  std::vector<ReduceOp> ops{ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                            ReduceOp::kMax, ReduceOp::kProduct, ReduceOp::kBand,
                            ReduceOp::kBor, ReduceOp::kBxor};
  std::vector<std::string> collectives{"allreduce",  "reduce_scatter", "allgather",
                                       "allgatherv", "broadcast",      "alltoall",
                                       "alltoallv",  "barrier",        "random_sum"};
  // The allreduce algorithm that allreduce and random_sum cases ask for.
  Algorithm algorithm = Algorithm::kAuto;
};

struct SweepResult {
  int passed = 0;
  int failed = 0;
  std::vector<std::string> failures;  // the first few, with the element that differed
  uint64_t digest = 0;                // hash of every rank's outputs, the same on all ranks
};

SweepResult run_sweep(Communicator& comm, const SweepConfig& config);

}  // namespace kolo::testing
