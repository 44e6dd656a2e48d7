// Job: sums over ranks, the default thread count, and the programs' exception guard.
#include "trainer/dist/job.h"

#include <algorithm>
#include <cstdio>
#include <new>
#include <string>

#include "comm/base/error.h"
#include "comm/bootstrap/host.h"
#include "comm/bootstrap/launch_env.h"
#include "fusion/engine.h"
#include "trainer/io/json_text.h"

namespace kolo::trainer {

std::vector<double> sum_over_ranks(Communicator& comm, std::vector<double> values) {
  if (comm.size() > 1)
    comm.allreduce(values.data(), values.data(), values.size(), DType::kFloat64, ReduceOp::kSum);
  return values;
}

Job Job::from_launcher() {
  const bootstrap::LaunchInfo info = bootstrap::detect_launch();
  Job job;
  job.rank_ = info.rank;
  job.world_ = info.size;
  return job;
}

Job Job::over(std::shared_ptr<Communicator> comm) {
  KOLO_CHECK_ARG(comm != nullptr, "Job::over: null communicator");
  Job job;
  job.rank_ = comm->rank();
  job.world_ = comm->size();
  job.comm = std::move(comm);
  return job;
}

void Job::connect() {
  // The engine's settings (DataParallel's engine) first, as Communicator::init reads its own:
  // a bad one fails every rank with its own message before any waits for another.
  (void)engine::EngineOptions::from_env();
  comm = Communicator::init();
  KOLO_CHECK_EQ(comm->size(), world_, ErrorCode::kInternal, "world size after the rendezvous");
}

namespace {

// "optimizer.type" for the JSON pointer "/optimizer/type".
std::string dotted(const std::string& pointer) {
  std::string out = pointer.empty() ? "(the whole settings)" : pointer.substr(1);
  std::replace(out.begin(), out.end(), '/', '.');
  return out;
}

// The first key (in key order) whose value differs between two flattened documents, or "" where
// none does (numbers compare by value: 32 and 32.0 are the same setting).
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b, std::string* va,
                             std::string* vb) {
  const nlohmann::json fa = a.flatten(), fb = b.flatten();
  std::vector<std::string> keys;
  for (const auto& [k, v] : fa.items()) keys.push_back(k);
  for (const auto& [k, v] : fb.items()) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  for (const std::string& k : keys) {
    const bool in_a = fa.contains(k), in_b = fb.contains(k);
    if (in_a && in_b && fa[k] == fb[k]) continue;
    *va = in_a ? fa[k].dump() : "nothing";
    *vb = in_b ? fb[k].dump() : "nothing";
    return dotted(k);
  }
  return "";
}

}  // namespace

void Job::require_same_settings(const nlohmann::json& settings) const {
  require_same(settings, "the settings",
               "every rank must run with the same config, --set overrides and options");
}

void Job::require_same_data(const nlohmann::json& summary) const {
  require_same(summary, "the data",
               "every rank must load the same data set: check --data / KOLO_DATA_DIR on each host");
}

void Job::require_same(const nlohmann::json& values, const std::string& what,
                       const std::string& fix) const {
  if (world_ == 1) return;
  // Keys sorted: the same text for the same values.
  const std::vector<std::string> all = allgather_bytes(*comm, values.dump());
  const std::string& first = all[0];
  for (size_t r = 1; r < all.size(); ++r) {
    const std::string& theirs = all[r];
    if (theirs == first) continue;
    std::string v0, vr;
    const std::string key =
        first_difference(parse_json(first, "rank 0's " + what),
                         parse_json(theirs, "another rank's " + what), &v0, &vr);
    if (key.empty()) continue;
    KOLO_THROW(ErrorCode::kMismatch, what, " differ between ranks: rank 0 has ", key, " = ", v0,
               ", rank ", r, " has ", vr, " (", fix, ")");
  }
}

std::vector<double> Job::sum(std::vector<double> values) const {
  return sum_over_ranks(*comm, std::move(values));
}

int Job::default_threads() const {
  return bootstrap::cpu_share(comm->host_cpus(), comm->local_size());
}

int run_program(const char* program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "%s: out of memory (a model, batch or sequence too large for this host?)\n",
                 program);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
  }
  return 1;
}

}  // namespace kolo::trainer
