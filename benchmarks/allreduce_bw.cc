// allreduce_bw: nccl-tests style bandwidth benchmark for kolo's collectives (--coll), with MPI and
// Gloo timed in the same run on the same buffers (--compare mpi,gloo). Any launcher, e.g.
//   kolorun -np 4 allreduce_bw -b 8 -e 256M -f 2      mpirun -np 4 allreduce_bw --compare mpi,gloo
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "benchmarks/baselines.h"
#include "benchmarks/bench_case.h"
#include "benchmarks/bench_options.h"
#include "benchmarks/cli_checks.h"
#include "benchmarks/copy_bound.h"
#include "benchmarks/report.h"
#include "comm/base/error.h"
#include "comm/bootstrap/launch_env.h"
#include "comm/communicator.h"
#include "kolo_config.h"

namespace kolo::bench {
namespace {

class KoloRunner : public Runner {
 public:
  KoloRunner(Communicator& comm, Algorithm algorithm) : comm_(comm) {
    options_.algorithm = algorithm;
  }
  const char* name() const override { return "kolo"; }
  std::string unsupported(const BenchCase&) const override { return ""; }
  void run(const BenchCase& c, Buffers& b) override {
    switch (c.coll) {
      case Collective::kAllreduce:
        return comm_.allreduce(send_buffer(c, b), b.recv(), c.count, c.dtype, c.op, options_);
      case Collective::kReduceScatter:
        return comm_.reduce_scatter(b.send(), b.recv(), c.block, c.dtype, c.op, options_);
      case Collective::kAllgather:
        return comm_.allgather(send_buffer(c, b), b.recv(), c.block, c.dtype, options_);
      case Collective::kBroadcast: return comm_.broadcast(b.recv(), c.count, c.dtype, 0, options_);
      case Collective::kAlltoall:
        return comm_.alltoall(b.send(), b.recv(), c.block, c.dtype, options_);
      case Collective::kBarrier: return comm_.barrier(options_);
    }
  }
  void barrier() override { comm_.barrier(); }

 private:
  Communicator& comm_;
  CollectiveOptions options_;
};

// Warm up, barrier, then `iters` back-to-back operations; the time per operation is the slowest
// rank's, agreed with a max-allreduce over kolo. With --check 1 one more operation runs on fresh
// inputs into a zeroed output, and its output is checked: the timed ones' output was written
// already by the warm-up, so a run that did nothing after its first call would pass.
Measurement measure(Communicator& comm, Runner& runner, const BenchCase& c, Buffers& buffers,
                    const Options& o) {
  Measurement m;
  m.unsupported = runner.unsupported(c);
  if (!m.unsupported.empty()) return m;
  runner.prepare(c, buffers);
  fill_inputs(c, buffers);
  runner.barrier();
  for (int i = 0; i < o.warmup_iters; ++i) runner.run(c, buffers);
  runner.barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iters; ++i) runner.run(c, buffers);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  m.seconds = elapsed.count() / o.iters;
  comm.allreduce(&m.seconds, &m.seconds, 1, DType::kFloat64, ReduceOp::kMax);
  if (!o.check) return m;
  fill_inputs(c, buffers);
  runner.barrier();
  runner.run(c, buffers);
  runner.finish_for_check(c, buffers);
  m.wrong = count_wrong(c, buffers);
  comm.allreduce(&m.wrong, &m.wrong, 1, DType::kInt64, ReduceOp::kSum);
  return m;
}

// The sizes to run, rounded to whole elements per rank, without repeats; each checked against
// --algo so that an algorithm kolo cannot run is a flag error before anything is timed.
std::vector<BenchCase> plan_cases(const Communicator& comm, const Options& o) {
  std::vector<BenchCase> cases;
  for (size_t bytes : size_steps(o)) {
    auto c = make_case(o.coll, o.dtype, o.op, comm.size(), comm.rank(), bytes);
    if (!c || (!cases.empty() && cases.back().bytes == c->bytes)) continue;
    c->in_place = o.in_place;
    try {
      comm.choose_algorithm(o.coll, c->bytes, CollectiveOptions{o.algorithm});
    } catch (const Error& e) {
      throw UsageError(2, "--algo: " + error_text(e));
    }
    cases.push_back(*c);
  }
  if (cases.empty())
    throw UsageError(2, "-b/--minbytes, -e/--maxbytes: no size in the range holds one " +
                            std::string(dtype_name(o.dtype)) + " element per rank");
  return cases;
}

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / double(size_t{1} << 30));
  return text;
}

// The buffers of the largest size on each host (two per rank there, of either --alloc kind)
// against the memory the host has left, refused on every rank before anything is allocated:
// alloc_shared's pages and malloc's are only backed when written, so a shortfall would
// otherwise fill memory (and /dev/shm) until the OOM killer stops a rank.
void check_host_memory(Communicator& comm, size_t bytes, bool shared) {
  const double mine[3] = {static_cast<double>(Buffers::footprint(bytes)) * comm.local_size(),
                          static_cast<double>(available_host_memory()),
                          static_cast<double>(comm.local_size())};
  std::vector<double> all(3 * static_cast<size_t>(comm.size()));
  comm.allgather(mine, all.data(), 3, DType::kFloat64);
  for (size_t r = 0; r < static_cast<size_t>(comm.size()); ++r) {
    const double need = all[3 * r], available = all[3 * r + 1], ranks = all[3 * r + 2];
    if (need <= available) continue;
    const std::string host =
        comm.local_size() == comm.size() ? "this host" : "the host of rank " + std::to_string(r);
    throw UsageError(2, "-e/--maxbytes: cannot allocate two buffers of " + std::to_string(bytes) +
                            " bytes (" + (shared ? "--alloc shared" : "private memory") +
                            ") per rank for the " + std::to_string(int(ranks)) +
                            (ranks == 1 ? " rank on " : " ranks on ") + host + ": " + gib(need) +
                            " in all, " + gib(available) +
                            " available; lower -e or the number of ranks on this host");
  }
}

// The flags every rank must share, in one form (the output files and --alloc may differ).
std::string shared_flags(const Options& o) {
  std::string compare;
  for (const std::string& c : o.compare) compare += (compare.empty() ? "" : ",") + c;
  return "-b " + std::to_string(o.min_bytes) + " -e " + std::to_string(o.max_bytes) + " -f " +
         std::to_string(o.step_factor) + " -n " + std::to_string(o.iters) + " -w " +
         std::to_string(o.warmup_iters) + " -c " + std::to_string(o.check) + " -d " +
         dtype_name(o.dtype) + " -o " + op_name(o.op) + " --coll " + collective_name(o.coll) +
         " --algo " + algorithm_name(o.algorithm) + " --transport " + transport_name(o.transport) +
         " --compare '" + compare + "' --inplace " + std::to_string(o.in_place) + " --bound " +
         std::to_string(o.bound);
}

// Rank 0 opens the output files; every rank learns whether that worked.
std::unique_ptr<Report> open_report(Communicator& comm, const Options& o) {
  std::unique_ptr<Report> report;
  std::string error;
  if (comm.rank() == 0) {
    RunInfo info{comm.size(), transport_name(comm.transport()), bootstrap::detect_launch().launcher,
                 KOLO_VERSION};
    try {
      report = std::make_unique<Report>(o, info);
    } catch (const UsageError& e) {
      error = e.what();
    }
  }
  int32_t failed = !error.empty();
  comm.allreduce(&failed, &failed, 1, DType::kInt32, ReduceOp::kMax);
  if (failed) throw UsageError(2, error);
  return report;
}

int run_benchmark(const Options& o) {
  CommunicatorOptions comm_options;
  comm_options.transport = o.transport;
  auto comm = Communicator::init(comm_options);
  std::vector<BenchCase> cases;
  std::vector<std::unique_ptr<Runner>> peers;
  std::unique_ptr<Report> report;
  require_same_flags(*comm, shared_flags(o));
  try {  // every rank meets the same usage error: leave together, rank 0 (the store) last
    cases = plan_cases(*comm, o);
    check_host_memory(*comm, cases.back().bytes, o.shared_buffers);
    for (const std::string& name : o.compare) peers.push_back(make_baseline(name, *comm));
    report = open_report(*comm, o);
  } catch (const UsageError& e) {
    // Print before the barrier: a launcher may stop rank 0 once another rank has exited.
    if (comm->rank() == 0) std::fprintf(stderr, "allreduce_bw: %s\n", e.what());
    comm->barrier();
    throw UsageError(e.exit_code(), "");
  }
  KoloRunner kolo(*comm, o.algorithm);
  Buffers buffers(cases.back().bytes, o.shared_buffers);
  if (report) report->print_header();
  int64_t wrong = 0;
  for (const BenchCase& c : cases) {
    Row row{c,
            algorithm_name(comm->choose_algorithm(c.coll, c.bytes, CollectiveOptions{o.algorithm})),
            measure(*comm, kolo, c, buffers, o),
            {},
            {}};
    if (o.bound)
      row.bound = measure_copy_bound(*comm, buffers.send(), buffers.recv(), c.bytes, o.iters);
    wrong += std::max<int64_t>(row.kolo.wrong, 0);
    for (auto& peer : peers) {
      row.peers.push_back(measure(*comm, *peer, c, buffers, o));
      wrong += std::max<int64_t>(row.peers.back().wrong, 0);
    }
    if (report) report->add(row);
  }
  if (report) report->finish();
  return wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace kolo::bench

int main(int argc, char** argv) {
  int rank = -1;  // until the launcher's variables are read (which refuses wrong ones)
  try {
    rank = kolo::bootstrap::detect_launch().rank;
    return kolo::bench::run_benchmark(kolo::bench::parse_options(argc, argv));
  } catch (const kolo::bench::UsageError& e) {
    // Errors found during the run come with an empty text: rank 0 printed them for every rank.
    // A flag refused before the communicator started is printed by each rank it was given to
    // (only rank 0's was: a launcher passing rank 1 its own bad flag said nothing but its exit
    // status); --help by rank 0 only.
    if (*e.what() && rank == 0)
      std::fprintf(e.exit_code() == 0 ? stdout : stderr, "%s%s\n",
                   e.exit_code() == 0 ? "" : "allreduce_bw: ", e.what());
    else if (*e.what() && e.exit_code() != 0)
      std::fprintf(stderr, "allreduce_bw: rank %d: %s\n", rank, e.what());
    // The others linger so that a launcher that stops the job at the first exit does not stop
    // rank 0 before it has printed.
    if (rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return e.exit_code();
  } catch (const std::exception& e) {
    if (rank < 0)
      std::fprintf(stderr, "allreduce_bw: %s\n", e.what());
    else
      std::fprintf(stderr, "allreduce_bw: rank %d: %s\n", rank, e.what());
    return 1;
  }
}
