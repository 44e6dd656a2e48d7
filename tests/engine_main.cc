// kolo_engine_check: the engine across real processes. Each rank submits 200 named tensors of
// random sizes and dtypes (fp32, fp64, fp16, bf16, int32) from 3 threads, in its own random
// order, for several steps; every result is checked (inputs are small integers, so sums are
// exact in every dtype). Rank 0 then checks the statistics (fusion and cache hits happened)
// and, with --timeline PATH, parses its Chrome trace and looks for every phase.
// Run: kolorun -np 3 kolo_engine_check --timeline /tmp/kolo_trace.json
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "fusion/engine.h"
#include "tests/common/values.h"

namespace {

using namespace kolo;
using engine::Handle;
using engine::TensorView;

constexpr int kTensors = 200, kSteps = 4, kThreads = 3;

struct Spec {
  DType dtype;
  size_t count;
};

std::vector<Spec> specs() {
  std::mt19937 rng(2024);  // the same on every rank
  const DType kinds[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                         DType::kInt32};
  std::vector<Spec> out;
  for (int i = 0; i < kTensors; ++i) out.push_back({kinds[rng() % 5], 1 + rng() % 20000});
  return out;
}

int failures = 0;
void expect(bool ok, const std::string& what) {
  if (ok) return;
  if (++failures <= 10) std::fprintf(stderr, "FAILED: %s\n", what.c_str());
}

// Element i of tensor t on rank r is ((t + i) % 5 + 1) * (r + 1): the sum over n ranks is
// ((t + i) % 5 + 1) * n(n+1)/2, at most 5 * 36 = 180, exact even in bf16.
void run_step(engine::Engine& eng, Communicator& comm, const std::vector<Spec>& spec, int step) {
  const int r = comm.rank(), n = comm.size();
  std::vector<std::vector<char>> data(spec.size());
  for (size_t t = 0; t < spec.size(); ++t) {
    data[t] = testing::make_buffer(spec[t].dtype, spec[t].count);
    for (size_t i = 0; i < spec[t].count; ++i)
      testing::store(spec[t].dtype, data[t].data(), i, double((t + i) % 5 + 1) * (r + 1));
  }
  std::vector<int> order(spec.size());
  for (size_t t = 0; t < order.size(); ++t) order[t] = static_cast<int>(t);
  std::shuffle(order.begin(), order.end(), std::mt19937(r * 1000 + step));
  std::vector<Handle> handles(spec.size());
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k)
    threads.emplace_back([&, k] {
      for (size_t j = k; j < order.size(); j += kThreads) {
        size_t t = static_cast<size_t>(order[j]);
        TensorView v{data[t].data(), spec[t].dtype, {static_cast<int64_t>(spec[t].count)}};
        handles[t] = eng.allreduce("layer" + std::to_string(t) + ".grad", v, v);
      }
    });
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < spec.size(); ++t) {
    auto s = handles[t].wait(std::chrono::seconds(120)) ? handles[t].status() : engine::Status{};
    expect(s.ok, "tensor " + std::to_string(t) + ": " + s.message);
    for (size_t i = 0; s.ok && i < spec[t].count; ++i) {
      double want = double((t + i) % 5 + 1) * n * (n + 1) / 2;
      double got = testing::load(spec[t].dtype, data[t].data(), i);
      if (got != want) {
        expect(false, "tensor " + std::to_string(t) + " element " + std::to_string(i) + ": " +
                          std::to_string(got) + " != " + std::to_string(want));
        break;
      }
    }
  }
}

// Every phase must appear in the trace: negotiation with per-rank ready ticks, queue, pack, the
// collective with its arguments, unpack.
void check_timeline(const std::string& path, int size) {
  std::ifstream in(path);
  auto trace = nlohmann::json::parse(in);
  std::set<std::string> phases, ticks;
  bool args = false;
  for (const auto& e : trace) {
    if (!e.contains("name")) continue;
    std::string name = e["name"];
    if (e["ph"] == "B") phases.insert(name);
    if (e["ph"] == "i" && name.rfind("ready rank", 0) == 0) ticks.insert(name);
    if (name == "ALLREDUCE" && e["ph"] == "B" && e.contains("args"))
      args = e["args"].contains("algorithm") && e["args"].contains("transport") &&
             e["args"].contains("bytes");
  }
  for (const char* p : {"NEGOTIATE", "QUEUE", "PACK", "ALLREDUCE", "UNPACK"})
    expect(phases.count(p) == 1, std::string("timeline has no ") + p + " phase");
  expect(static_cast<int>(ticks.size()) == size, "timeline has a ready tick for every rank");
  expect(args, "ALLREDUCE events carry algorithm, transport and bytes");
}

}  // namespace

int main(int argc, char** argv) try {
  std::string timeline = argc > 2 && std::string(argv[1]) == "--timeline" ? argv[2] : "";
  auto comm = Communicator::init();
  auto options = engine::EngineOptions::from_env();
  options.timeline_path = timeline;
  auto spec = specs();
  engine::EngineStats stats;
  {
    engine::Engine eng(comm, options);
    for (int step = 0; step < kSteps; ++step) run_step(eng, *comm, spec, step);
    stats = eng.stats();
  }
  expect(stats.responses == uint64_t(kTensors) * kSteps, "every tensor got a response");
  expect(stats.fused_collectives > 0, "fusion happened");
  expect(stats.cache_hits > 0, "the response cache was hit");
  if (comm->rank() == 0 && !timeline.empty()) check_timeline(timeline, comm->size());
  int total = failures;
  comm->allreduce(&total, &total, 1, DType::kInt32, ReduceOp::kSum);
  if (comm->rank() == 0) {
    std::printf(
        "engine check: %d ranks, %d steps x %d tensors; %llu negotiations, %llu cache "
        "hits, %llu fused collectives carrying %llu tensors, %llu of %llu bytes sent\n",
        comm->size(), kSteps, kTensors, (unsigned long long)stats.negotiations,
        (unsigned long long)stats.cache_hits, (unsigned long long)stats.fused_collectives,
        (unsigned long long)stats.fused_tensors, (unsigned long long)stats.bytes_sent,
        (unsigned long long)stats.bytes_submitted);
    std::printf("%d passed, %d failed\n", total == 0 ? 1 : 0, total == 0 ? 0 : 1);
  }
  return total == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "kolo_engine_check: %s\n", e.what());
  return 1;
}
