// engine_overhead: the cost of going through the engine (negotiation, cache, fusion) compared
// with one direct Communicator allreduce of the same bytes (the floor). Three workloads, each
// reported as the median over steps:
//   1 x 8 B allreduce            (latency: submit + wait)
//   100 x 4 KiB async, then wait  (per step; small-tensor overhead)
//   100 x 256 KiB async, then wait (per step; busbw of the fused collectives)
// Run: mpirun -np 2 build/benchmarks/engine_overhead   (or kolorun -np 2 ...)
// --device cuda (builds with CUDA and NCCL): the tensors are in device 0's memory, the engine
// runs them through kolo_engine_cuda, and the floor is one raw NCCL allreduce, waited for.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "benchmarks/bench_memory.h"
#include "benchmarks/cli_checks.h"
#include "comm/base/cli_parse.h"
#include "comm/communicator.h"
#include "fusion/engine.h"

namespace {

using Clock = std::chrono::steady_clock;
using kolo::engine::Engine;
using kolo::engine::Handle;
using kolo::engine::TensorView;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median microseconds of `body` over `steps` timed steps after `warmup` untimed ones; the
// slowest rank's median is reported (max-allreduce).
template <typename Fn>
double time_steps(kolo::Communicator& comm, int warmup, int steps, Fn body) {
  std::vector<double> us;
  for (int s = 0; s < warmup + steps; ++s) {
    comm.barrier();
    auto t0 = Clock::now();
    body(s);
    double t = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (s >= warmup) us.push_back(t);
  }
  double m = median(us);
  comm.allreduce(&m, &m, 1, kolo::DType::kFloat64, kolo::ReduceOp::kMax);
  return m;
}

struct Workload {
  const char* name;
  int tensors;
  size_t bytes_each;
};

void run(kolo::Communicator& comm, Engine& engine, kolo::bench::BenchMemory& memory,
         const Workload& w, int warmup, int steps) {
  const size_t count = w.bytes_each / sizeof(float);
  std::vector<float*> data;
  for (int i = 0; i < w.tensors; ++i) data.push_back(memory.alloc(count));
  std::vector<Handle> handles(static_cast<size_t>(w.tensors));
  // Names are made once, as a framework names its gradients (building 100 strings per step
  // cost about 20 us here, which is the benchmark's own time, not the engine's).
  std::vector<std::string> names;
  for (int i = 0; i < w.tensors; ++i)
    names.push_back(std::string(w.name) + "." + std::to_string(i));
  double engine_us = time_steps(comm, warmup, steps, [&](int) {
    for (int i = 0; i < w.tensors; ++i) {
      TensorView v{data[static_cast<size_t>(i)],
                   kolo::DType::kFloat32,
                   {static_cast<int64_t>(count)},
                   memory.device()};
      handles[static_cast<size_t>(i)] = engine.allreduce(names[static_cast<size_t>(i)], v, v);
    }
    for (auto& h : handles) h.check();
  });
  float* flat = memory.alloc(count * static_cast<size_t>(w.tensors));
  double floor_us = time_steps(comm, warmup, steps, [&](int) {
    memory.direct_allreduce(flat, count * static_cast<size_t>(w.tensors));
  });
  const int n = comm.size();
  const double total = double(w.bytes_each) * w.tensors;
  const double busbw = total * 2.0 * (n - 1) / n / engine_us / 1e3;
  if (comm.rank() == 0)
    std::printf("%-22s %12.1f %12.1f %10.2f %12.3f %13.1f\n", w.name, engine_us, floor_us,
                engine_us / floor_us, busbw, engine_us - floor_us);
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"kolo engine overhead: engine vs direct Communicator allreduce"};
  int steps = 50, warmup = 5;
  app.add_option("-n,--steps", steps, "timed steps per workload")->check(CLI::Range(1, 100000));
  app.add_option("-w,--warmup", warmup, "untimed steps first")->check(CLI::Range(0, 100000));
  std::vector<std::string> only;
  app.add_option("--only", only, "run only these workloads (1x8B, 100x4KiB, 100x256KiB)")
      ->check(CLI::IsMember({"1x8B", "100x4KiB", "100x256KiB"}))
      ->delimiter(',');
  std::string device = "host";
  app.add_option("--device", device, "where the tensors live: host, or cuda (device 0; NCCL)")
      ->check(CLI::IsMember({"host", "cuda"}));
  KOLO_PARSE_FLAGS(app, argc, argv, "engine_overhead");
  auto comm = kolo::Communicator::init();
  kolo::bench::require_same_flags(*comm, kolo::bench::joined_flags(argc, argv));
  auto memory =
      device == "cuda" ? kolo::bench::cuda_memory(*comm) : kolo::bench::host_memory(*comm);
  kolo::engine::EngineOptions options = kolo::engine::EngineOptions::from_env();
  options.device = memory->backend();
  Engine engine(comm, options);
  if (comm->rank() == 0) {
    std::printf(
        "# engine_overhead: %d ranks over %s, %s tensors, %d steps (median, slowest rank)\n",
        comm->size(), kolo::transport_name(comm->transport()), device.c_str(), steps);
    std::printf("%-22s %12s %12s %10s %12s %13s\n", "workload", "engine(us)", "direct(us)", "ratio",
                "busbw(GB/s)", "overhead(us)");
  }
  for (Workload w : {Workload{"1x8B", 1, 8}, Workload{"100x4KiB", 100, 4096},
                     Workload{"100x256KiB", 100, 256 * 1024}})
    if (only.empty() || std::find(only.begin(), only.end(), w.name) != only.end())
      run(*comm, engine, *memory, w, warmup, steps);
  auto s = engine.stats();
  if (comm->rank() == 0)
    std::printf(
        "# engine stats: %llu cycles, %llu negotiations, %llu cache hits, %llu "
        "responses, %llu fused collectives carrying %llu tensors\n",
        (unsigned long long)s.cycles, (unsigned long long)s.negotiations,
        (unsigned long long)s.cache_hits, (unsigned long long)s.responses,
        (unsigned long long)s.fused_collectives, (unsigned long long)s.fused_tensors);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "engine_overhead: %s\n", e.what());
  return 1;
}
