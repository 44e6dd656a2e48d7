// A training program's place in the job: the communicator from the launcher (mpirun, kolorun,
// torchrun-style variables, Slurm; a plain start is a job of one), whether this rank prints,
// sums of scalars over the ranks, and the default thread count per rank.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace kolo::trainer {

struct Job {
  std::shared_ptr<Communicator> comm;

  static Job from_launcher() { return Job{Communicator::init()}; }
  int rank() const { return comm->rank(); }
  int world() const { return comm->size(); }
  bool lead() const { return comm->rank() == 0; }  // the rank that prints progress
  // Element-wise sums over every rank (each rank gets the same result).
  std::vector<double> sum(std::vector<double> values) const;
  // One process per rank: the cores of this host shared out among its ranks, at least 1.
  int default_threads() const;
};

// The same sum on any communicator (DataParallel's scalars use it too).
std::vector<double> sum_over_ranks(Communicator& comm, std::vector<double> values);

}  // namespace kolo::trainer
