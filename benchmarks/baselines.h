// What allreduce_bw times: a Runner runs one collective on the shared buffers. kolo is one
// runner; MPI (MPI_COMM_WORLD, only under mpirun) and Gloo (tcp on this host, rendezvous over
// kolo's store) are the baselines, compiled in when the build found them (KOLO_HAVE_MPI/GLOO).
#pragma once

#include <memory>
#include <string>

#include "benchmarks/bench_case.h"
#include "kolo_config.h"

namespace kolo {
class Communicator;
}

namespace kolo::bench {

class Runner {
 public:
  virtual ~Runner() = default;
  virtual const char* name() const = 0;
  // Why this runner cannot run `c` (it shows "n/a"), or "" when it can.
  virtual std::string unsupported(const BenchCase& c) const = 0;
  // Called once per size, before the inputs are filled and outside the timing.
  virtual void prepare(const BenchCase& /*c*/, Buffers& /*buffers*/) {}
  virtual void run(const BenchCase& c, Buffers& buffers) = 0;
  virtual void barrier() = 0;
  // After the checked run (fresh inputs, zeroed output): moves the result to where
  // count_wrong() looks, for a runner that leaves it elsewhere.
  virtual void finish_for_check(const BenchCase& /*c*/, Buffers& /*buffers*/) {}
};

// A baseline named by --compare ("mpi" or "gloo"). Throws UsageError (exit 2) when it cannot run
// here: not compiled in, or (mpi) not started by mpirun with one MPI process per kolo rank.
// Collective over `comm`: every rank calls it in the same order.
std::unique_ptr<Runner> make_baseline(const std::string& name, Communicator& comm);

#if KOLO_HAVE_MPI
std::unique_ptr<Runner> make_mpi_baseline(Communicator& comm);
#endif
#if KOLO_HAVE_GLOO
std::unique_ptr<Runner> make_gloo_baseline(Communicator& comm);
#endif

}  // namespace kolo::bench
