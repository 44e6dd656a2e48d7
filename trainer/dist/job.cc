// Job: sums over ranks, the default thread count, and the programs' exception guard.
#include "trainer/dist/job.h"

#include <algorithm>
#include <cstdio>
#include <new>

#include "comm/base/error.h"
#include "comm/bootstrap/host.h"
#include "comm/bootstrap/launch_env.h"

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

void Job::connect() {
  comm = Communicator::init();
  KOLO_CHECK_EQ(comm->size(), world_, ErrorCode::kInternal, "world size after the rendezvous");
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
