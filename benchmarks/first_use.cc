// first_use: the first allreduce of a fresh communicator against its steady state. Each trial
// splits a new communicator off the world (new shared-memory segments, staging slots and
// rings), times its first allreduce of --bytes, then --iters more; the slowest rank's times.
//   kolorun -np 2 build/benchmarks/first_use [--bytes 1M] [--trials 10] [--iters 20]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "benchmarks/bench_options.h"
#include "benchmarks/cli_checks.h"
#include "comm/base/cli_parse.h"
#include "comm/communicator.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Microseconds of one allreduce of `data` over `comm`, the slowest rank's (timed after a
// barrier of `world`, which does not warm `comm`).
double timed_allreduce(kolo::Communicator& world, kolo::Communicator& comm,
                       std::vector<float>& data) {
  world.barrier();
  const auto start = Clock::now();
  comm.allreduce(data.data(), data.data(), data.size(), kolo::DType::kFloat32,
                 kolo::ReduceOp::kSum);
  double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  world.allreduce(&us, &us, 1, kolo::DType::kFloat64, kolo::ReduceOp::kMax);
  return us;
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"kolo first_use: a fresh communicator's first allreduce against its steady state"};
  std::string bytes_text = "1M";
  int trials = 10, iters = 20;
  app.add_option("--bytes", bytes_text, "allreduce size (K/M suffixes)");
  app.add_option("--trials", trials, "fresh communicators")->check(CLI::Range(1, 1000));
  app.add_option("--iters", iters, "operations after the first, per trial")
      ->check(CLI::Range(1, 100000));
  KOLO_PARSE_FLAGS(app, argc, argv, "first_use");
  const size_t bytes = kolo::bench::parse_bytes(bytes_text, "--bytes");
  // A first-use latency is a small message's: 256 MiB per rank at most (4 GiB on each of a few
  // ranks reached the OOM killer before any check).
  if (bytes < sizeof(float) || bytes > (size_t{256} << 20))
    throw kolo::bench::UsageError(
        2, "--bytes: '" + bytes_text + "' is not accepted; expected 4 B to 256M");
  auto world = kolo::Communicator::init();
  kolo::bench::require_same_flags(*world, kolo::bench::joined_flags(argc, argv));
  std::vector<float> data(bytes / sizeof(float), 1.0f);
  std::vector<double> firsts, steadies;
  for (int t = 0; t < trials; ++t) {
    auto fresh = world->split(0, world->rank());
    firsts.push_back(timed_allreduce(*world, *fresh, data));
    std::vector<double> rest;
    for (int i = 0; i < iters; ++i) rest.push_back(timed_allreduce(*world, *fresh, data));
    steadies.push_back(median(rest));
  }
  if (world->rank() == 0) {
    std::printf("# first_use: %d ranks over %s, %zu B fp32 sum, %d fresh communicators\n",
                world->size(), kolo::transport_name(world->transport()), data.size() * 4, trials);
    std::printf("first_us %.1f  steady_us %.1f  ratio %.2fx  (medians; first max %.1f us)\n",
                median(firsts), median(steadies), median(firsts) / median(steadies),
                *std::max_element(firsts.begin(), firsts.end()));
  }
  return 0;
} catch (const kolo::bench::UsageError& e) {
  std::fprintf(stderr, "first_use: %s\n", e.what());
  return e.exit_code();
} catch (const std::exception& e) {
  std::fprintf(stderr, "first_use: %s\n", e.what());
  return 1;
}
