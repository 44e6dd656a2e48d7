// engine_soak: a long run of the engine that must leave no trace. Every rank submits the same
// stream of ops (allreduce sum/avg/min/max with scale factors and compression, allgather with
// per-rank row counts, broadcast, alltoall with uneven splits, reduce_scatter) over every dtype,
// 1 element to 1 MiB, named from a rotating set larger than the response cache, in groups of
// 1-64 outstanding ops; every result is checked bit for bit against its closed form. Injected
// faults: a mismatch (the last rank changes dtype, shape or op type of a name) must fail on
// every rank with kMismatch, and bad arguments must be refused with kInvalidArgument; the
// engine must keep working. RSS, open fds and /dev/shm entries are sampled at each report and
// must be flat from 10% of the ops to the end. Exit status 0 on PASS. The ops themselves are in
// engine_soak_ops.h; the output lines are described in docs/performance.md.
// Run: kolorun -np 2 build/benchmarks/engine_soak [--ops N] [--report-every N]
//      [--fault-every N] [--names N] [--max-rss-growth PERCENT]
#include <dirent.h>
#include <malloc.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "benchmarks/cli_checks.h"
#include "benchmarks/engine_soak_ops.h"
#include "comm/base/cli_parse.h"
#include "comm/communicator.h"

namespace {

using namespace kolo;
using namespace kolo::soak;
using engine::Engine;
using Clock = std::chrono::steady_clock;

constexpr int kMaxGroup = 64, kHotNames = 256;
constexpr auto kOpTimeout = std::chrono::seconds(120);

// ---- What the process holds: resident memory, open descriptors, /dev/shm entries ----

struct Sample {
  double rss_mib = 0, heap_mib = 0;    // heap: what malloc has handed out and not got back
  int fds = 0, shm = 0, shm_kolo = 0;  // shm_kolo: names with kolo's segment prefix
};

// Entries of a directory ("." and ".." excluded), and those whose name starts with `prefix`.
std::pair<int, int> count_entries(const char* path, const char* prefix) {
  int all = 0, matching = 0;
  if (DIR* dir = ::opendir(path)) {
    while (const dirent* e = ::readdir(dir)) {
      if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
      ++all;
      matching += std::strncmp(e->d_name, prefix, std::strlen(prefix)) == 0;
    }
    ::closedir(dir);
  }
  return {all, matching};
}

// RSS is read after malloc_trim(0), so it counts memory in use rather than what the allocator
// keeps cached from the last large buffers (a difference of megabytes between samples).
Sample take_sample() {
  ::malloc_trim(0);
  Sample s;
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  s.rss_mib = double(resident) * double(::sysconf(_SC_PAGESIZE)) / (1 << 20);
  const struct mallinfo2 heap = ::mallinfo2();
  s.heap_mib = double(heap.uordblks + heap.hblkhd) / (1 << 20);
  s.fds = count_entries("/proc/self/fd", "").first - 1;  // less the one opendir holds
  // comm/transport/shm names its segments /kolo-<job>-<rank> (unlinked once every rank mapped).
  std::tie(s.shm, s.shm_kolo) = count_entries("/dev/shm", "kolo-");
  return s;
}

// ---- The run ----

struct Settings {
  int64_t ops = 1000000, report_every = 0, fault_every = 10000;
  int names = 5000;
  // Percent. High-water marks that are no leak still move RSS now and then: the fusion buffer's
  // pages as a larger fused op first comes, the allocator's arenas (4% at np=2 and 6% at np=3 of
  // a fast run's 16-19 MiB, in one step late in the run); the smallest leak per op, one 32-byte
  // chunk, would add 30 MiB (about 190%) over the default million ops, and one per cycle about
  // 2.5 MiB (15%).
  double max_rss_growth = 10.0;
};

struct Tally {
  int64_t ops = 0, wrong = 0, injected = 0, caught = 0, tried = 0, refused = 0;
  Sample start, at_10, end;
  bool stuck = false;
};

class Soak {
 public:
  Soak(Engine& eng, const Settings& s, int me, int n)
      : eng_(eng), s_(s), me_(me), n_(n), shuffle_(uint64_t(me) + 1) {}

  Tally run() {
    // The "10%" sample comes after the first group at the earliest: the engine connects and
    // opens what it keeps at its first ops, which a sample before them would count as growth.
    const int64_t tenth = std::max<int64_t>(1, s_.ops / 10);
    t_.start = t_.at_10 = take_sample();
    while (t_.ops < s_.ops && !t_.stuck) {
      const int64_t before = t_.ops;
      run_group();
      if (before < tenth && t_.ops >= tenth) t_.at_10 = take_sample();
      if (before / s_.report_every != t_.ops / s_.report_every || t_.ops >= s_.ops) report();
    }
    t_.end = take_sample();
    return t_;
  }

 private:
  // 60% of the names from a hot set the cache keeps, 40% rotating through all of them (which
  // evicts the hot ones now and then). The same draws on every rank.
  std::vector<int> pick_names(int count) {
    std::vector<int> names;
    while (int(names.size()) < count) {
      int k = shared_() % 10 < 6 ? int(shared_() % kHotNames) : cold_++ % s_.names;
      while (std::find(names.begin(), names.end(), k) != names.end()) k = cold_++ % s_.names;
      names.push_back(k);
    }
    return names;
  }

  void run_group() {
    const int count = int(std::min<int64_t>(1 + shared_() % kMaxGroup, s_.ops - t_.ops));
    std::vector<Op> group;
    for (int k : pick_names(count)) {
      Op& op = group.emplace_back();
      op.name = "t" + std::to_string(k);
      op.spec = spec_of(k, n_);
      const int64_t j = t_.ops + int64_t(group.size()) - 1;  // the op's index in the run
      if (j % s_.fault_every == s_.fault_every / 2) {
        op.injected = true;
        if (me_ == n_ - 1) op.spec = mismatched(op.spec, int(t_.injected % 3));
        ++t_.injected;
      }
    }
    std::vector<size_t> order(group.size());  // each rank submits in its own order
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), shuffle_);
    for (size_t i : order) submit(eng_, group[i], me_, n_);
    // A bad call while the group is in flight for each op fault_every * m the group passes
    // (same ranks, same ops): a group may pass several when --fault-every is small.
    for (int64_t m = t_.ops / s_.fault_every; m < (t_.ops + count) / s_.fault_every; ++m)
      bad_call();
    for (Op& op : group) {
      if (!op.handle.wait(kOpTimeout)) {
        fail("'" + op.name + "' did not finish in " + std::to_string(kOpTimeout.count()) + " s");
        t_.stuck = true;
        return;
      }
      const std::string why = check(op, me_, n_);
      if (op.injected && why.empty()) ++t_.caught;
      if (!why.empty() && !op.injected) ++t_.wrong;
      if (!why.empty()) fail(why);
    }
    t_.ops += count;
  }

  void bad_call() {
    const std::string why = try_bad_call(eng_, int(t_.tried % kBadCalls), n_);
    ++t_.tried;
    if (why.empty())
      ++t_.refused;
    else
      fail(why);
  }

  void report() const {
    const Sample s = take_sample();
    std::printf(
        "soak rank %d: ops %lld/%lld (%.1f s), rss %.1f MiB (heap %.2f), fds %d, /dev/shm %d "
        "(kolo %d), errors: mismatch %lld invalid %lld\n",
        me_, (long long)t_.ops, (long long)s_.ops,
        std::chrono::duration<double>(Clock::now() - t0_).count(), s.rss_mib, s.heap_mib, s.fds,
        s.shm, s.shm_kolo, (long long)t_.caught, (long long)t_.refused);
    std::fflush(stdout);
  }

  void fail(const std::string& why) {
    if (++failures_ <= 10) std::fprintf(stderr, "soak rank %d: FAILED: %s\n", me_, why.c_str());
  }

  Engine& eng_;
  const Settings& s_;
  const int me_, n_;
  std::mt19937_64 shared_{20240601};  // group sizes and names: the same on every rank
  std::mt19937_64 shuffle_;           // submission order: this rank's own
  int cold_ = 0;
  int failures_ = 0;
  Tally t_;
  const Clock::time_point t0_ = Clock::now();
};

// What each rank sends rank 0 at the end: doubles only, gathered as one array.
struct Outcome {
  double rss_10, rss_end, fds_10, fds_end, shm_10, shm_end;
  double wrong, injected, caught, tried, refused, stuck;
};
constexpr size_t kOutcomeDoubles = sizeof(Outcome) / sizeof(double);

Outcome outcome_of(const Tally& t) {
  return {
      t.at_10.rss_mib,          t.end.rss_mib,          double(t.at_10.fds), double(t.end.fds),
      double(t.at_10.shm_kolo), double(t.end.shm_kolo), double(t.wrong),     double(t.injected),
      double(t.caught),         double(t.tried),        double(t.refused),   t.stuck ? 1.0 : 0.0};
}

double rss_growth(const Outcome& o) {
  return (o.rss_end - o.rss_10) / o.rss_10 * 100;
}

std::string percent(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f%%", value);
  return text;
}

// Rank 0's verdict over every rank's outcome: "" for PASS, else every reason.
std::string verdict(const std::vector<Outcome>& all, const Settings& s) {
  std::string why;
  for (size_t r = 0; r < all.size(); ++r) {
    const Outcome& o = all[r];
    auto add = [&](const std::string& what) {
      why += (why.empty() ? "rank " : "; rank ") + std::to_string(r) + " " + what;
    };
    if (rss_growth(o) >= s.max_rss_growth)
      add("rss grew " + percent(rss_growth(o)) + " (limit " + percent(s.max_rss_growth) + ")");
    if (o.fds_end > o.fds_10) add("fds grew");
    if (o.shm_end > o.shm_10) add("kolo /dev/shm entries grew");
    if (o.wrong != 0) add("had wrong results");
    if (o.caught != o.injected) add("missed injected mismatches");
    if (o.refused != o.tried) add("accepted bad arguments");
    if (o.stuck != 0) add("got stuck");
  }
  return why;
}

void print_summary(const std::vector<Outcome>& all, const Tally& t, double seconds,
                   const std::string& why) {
  const Outcome* worst = &all[0];
  double fds_10 = 0, fds_end = 0, wrong = 0;
  for (const Outcome& o : all) {
    if (rss_growth(o) > rss_growth(*worst)) worst = &o;
    fds_10 += o.fds_10;
    fds_end += o.fds_end;
    wrong += o.wrong;
  }
  std::printf(
      "soak: %lld ops in %.1f s, rss growth after 10%%: %.2f%% (%.1f MiB -> %.1f MiB), fds %.0f "
      "-> %.0f, /dev/shm %d -> %d, mismatches caught %lld/%lld, invalid arguments refused "
      "%lld/%lld, wrong results %.0f: %s%s\n",
      (long long)t.ops, seconds, rss_growth(*worst), worst->rss_10, worst->rss_end, fds_10, fds_end,
      t.at_10.shm_kolo, t.end.shm_kolo, (long long)t.caught, (long long)t.injected,
      (long long)t.refused, (long long)t.tried, wrong,
      why.empty() ? "PASS" : "FAIL: ", why.c_str());
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"kolo engine soak: many mixed engine ops; memory, fds and /dev/shm stay flat"};
  Settings s;
  app.add_option("--ops", s.ops, "engine ops in all")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--report-every", s.report_every, "ops between reports (default ops/20)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--fault-every", s.fault_every,
                 "ops between injected mismatches (and between bad arguments)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 40));
  app.add_option("--names", s.names, "tensor names in rotation")
      ->check(CLI::Range(2 * kHotNames, 1 << 24));
  app.add_option("--max-rss-growth", s.max_rss_growth,
                 "largest RSS growth (percent) from 10% of the ops to the end")
      ->check(kolo::bench::finite_range(0));
  KOLO_PARSE_FLAGS(app, argc, argv, "engine_soak");
  if (s.report_every == 0) s.report_every = std::max<int64_t>(1, s.ops / 20);

  // Blocks of 128 KiB and more get mappings of their own, returned when freed. Otherwise glibc
  // raises this threshold as large blocks are freed and serves them from a thread's heap, whose
  // resident size then follows the largest ops seen so far (+0.4 MiB from 10% to 20% of a run,
  // the heap in use flat): a high-water mark of the allocator, not of kolo.
  ::mallopt(M_MMAP_THRESHOLD, 128 << 10);
  auto comm = Communicator::init();
  kolo::bench::require_same_flags(*comm, kolo::bench::joined_flags(argc, argv));
  const int me = comm->rank(), n = comm->size();
  KOLO_CHECK_ARG(n >= 2 && n <= 7, "engine_soak runs on 2-7 ranks (uint8 sums stay exact), not ",
                 n);
  const Sample before_engine = take_sample();
  Tally t;
  double seconds = 0;
  engine::EngineStats stats;
  {
    Engine eng(comm);
    comm->barrier();
    const auto t0 = Clock::now();
    t = Soak(eng, s, me, n).run();
    seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    stats = eng.stats();
  }
  const Sample after_engine = take_sample();
  std::printf("soak rank %d: fds %d before the engine, %d after it shut down\n", me,
              before_engine.fds, after_engine.fds);
  const Outcome mine = outcome_of(t);
  std::vector<Outcome> all(static_cast<size_t>(n));
  comm->allgather(&mine, all.data(), kOutcomeDoubles, DType::kFloat64);
  const std::string why = verdict(all, s);
  if (me == 0) {
    std::printf("# engine stats: %llu cycles, %llu negotiations, %llu cache hits, %llu responses\n",
                (unsigned long long)stats.cycles, (unsigned long long)stats.negotiations,
                (unsigned long long)stats.cache_hits, (unsigned long long)stats.responses);
    print_summary(all, t, seconds, why);
    std::fflush(stdout);
  }
  comm->barrier();  // the launcher stops every rank at the first failed exit: print first
  return why.empty() ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "engine_soak: %s\n", e.what());
  return 1;
}
