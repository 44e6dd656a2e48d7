// kolo_sweep: the collective sweep (tests/common/sweep.h) as a multi-process program. Start it
// with any launcher: `kolorun -np 4 kolo_sweep`, `mpirun -np 4 kolo_sweep --transport mpi`, or
// with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set (torchrun style). Rank 0 prints the failures,
// the digest of all results and "N passed, N failed"; the exit code is 1 if anything failed.
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>

#include "comm/base/env.h"
#include "comm/base/error.h"
#include "comm/bootstrap/mpi_world.h"
#include "comm/communicator.h"
#include "tests/common/sweep.h"

namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) items.push_back(item);
  return items;
}

void usage() {
  std::printf(
      "usage: kolo_sweep [--transport auto|shm|tcp|mpi|ucx] [--sizes N,N,...] [--dtypes d,...]\n"
      "                  [--ops o,...] [--collectives c,...] [--late-rank0 SECONDS]\n"
      "  --late-rank0 S: for tests, under mpirun: MPI is initialized first, then world rank 0\n"
      "                  waits S seconds before kolo's init (the others wait for it there)\n");
}

}  // namespace

int main(int argc, char** argv) try {
  kolo::CommunicatorOptions options;
  kolo::testing::SweepConfig config;
  int64_t late_rank0 = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      KOLO_CHECK_ARG(i + 1 < argc, arg, " needs a value");
      return argv[++i];
    };
    if (arg == "--transport") {
      options.transport = kolo::parse_transport(value(), "--transport");
    } else if (arg == "--sizes") {
      config.sizes.clear();
      for (auto& s : split_list(value()))
        config.sizes.push_back(static_cast<size_t>(kolo::env::parse_int(s, "--sizes", 0, 1 << 30)));
    } else if (arg == "--dtypes") {
      config.dtypes.clear();
      for (auto& s : split_list(value())) config.dtypes.push_back(kolo::parse_dtype(s, "--dtypes"));
    } else if (arg == "--ops") {
      config.ops.clear();
      for (auto& s : split_list(value())) config.ops.push_back(kolo::parse_op(s, "--ops"));
    } else if (arg == "--collectives") {
      config.collectives = split_list(value());
    } else if (arg == "--late-rank0") {
      late_rank0 = kolo::env::parse_int(value(), "--late-rank0", 0, 3600);
    } else if (arg == "-h" || arg == "--help") {
      usage();
      return 0;
    } else {
      usage();
      KOLO_THROW(kolo::ErrorCode::kInvalidArgument, "unknown option ", arg);
    }
  }
  if (late_rank0 > 0) {
    kolo::bootstrap::mpi_world::ensure_initialized();
    if (kolo::bootstrap::mpi_world::world_rank() == 0)
      std::this_thread::sleep_for(std::chrono::seconds(late_rank0));
  }
  auto comm = kolo::Communicator::init(options);
  auto result = kolo::testing::run_sweep(*comm, config);
  if (comm->rank() == 0) {
    for (const auto& f : result.failures) std::printf("FAILED: %s\n", f.c_str());
    std::printf("sweep: np=%d transport=%s digest=%016llx\n", comm->size(),
                kolo::transport_name(comm->transport()),
                static_cast<unsigned long long>(result.digest));
    std::printf("%d passed, %d failed\n", result.passed, result.failed);
  } else if (!result.failures.empty()) {
    std::fprintf(stderr, "FAILED: %s\n", result.failures.front().c_str());
  }
  return result.failed == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "kolo_sweep: %s\n", e.what());
  return 1;
}
