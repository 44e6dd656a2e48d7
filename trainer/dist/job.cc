// Job: sums over ranks and the default thread count.
#include "trainer/dist/job.h"

#include <algorithm>
#include <thread>

namespace kolo::trainer {

std::vector<double> sum_over_ranks(Communicator& comm, std::vector<double> values) {
  if (comm.size() > 1)
    comm.allreduce(values.data(), values.data(), values.size(), DType::kFloat64, ReduceOp::kSum);
  return values;
}

std::vector<double> Job::sum(std::vector<double> values) const {
  return sum_over_ranks(*comm, std::move(values));
}

int Job::default_threads() const {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, comm->local_size()));
}

}  // namespace kolo::trainer
