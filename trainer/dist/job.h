// A training program's place in the job: the communicator from the launcher (mpirun, kolorun,
// torchrun-style variables, Slurm; a plain start is a job of one), whether this rank prints,
// sums of scalars over the ranks, and the default thread count per rank.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"

namespace kolo::trainer {

struct Job {
  // Rank and size from the launcher's variables alone: settings that depend on the world size
  // are checked before any connection, so a bad one gives the same error on every rank instead
  // of a lost rendezvous on ranks that were slower to fail.
  static Job from_launcher();
  // A job over a communicator the caller already has (connected: rank and world are its own).
  static Job over(std::shared_ptr<Communicator> comm);
  // The rendezvous (Communicator::init()); needed by everything below but rank(), world(), lead().
  void connect();
  // After connect(): every rank's `settings` (the config after overrides, and the program's
  // options that shape the run) must be the same, or every rank throws kMismatch naming the
  // first key that differs and two ranks' values. Ranks that differ would average unlike
  // gradients, or wait for collectives the others never start.
  void require_same_settings(const nlohmann::json& settings) const;
  // After the data are loaded: what each rank loaded (counts, token totals) must be the same,
  // or every rank throws kMismatch "the data differ between ranks: ..." (the data folders may
  // differ per host; ranks with other files would average gradients of other data and run
  // different numbers of steps).
  void require_same_data(const nlohmann::json& summary) const;

  int rank() const { return rank_; }
  int world() const { return world_; }
  bool lead() const { return rank_ == 0; }  // the rank that prints progress
  // Element-wise sums over every rank (each rank gets the same result).
  std::vector<double> sum(std::vector<double> values) const;
  // One process per rank: the CPUs this host's ranks run on shared out among them (at most
  // this process's own, at least 1).
  int default_threads() const;

  std::shared_ptr<Communicator> comm;  // null before connect()

 private:
  // require_same_settings and require_same_data: `what` ("the settings") and the fix to name.
  void require_same(const nlohmann::json& values, const std::string& what,
                    const std::string& fix) const;

  int rank_ = 0, world_ = 1;
};

// A training program's main: runs `body`, and turns every exception (kolo::Error, out of
// memory, a JSON type error, a file system error) into one line "<program>: ..." on stderr
// and exit status 1.
int run_program(const char* program, const std::function<int()>& body);

// The same sum on any communicator (DataParallel's scalars use it too).
std::vector<double> sum_over_ranks(Communicator& comm, std::vector<double> values);

}  // namespace kolo::trainer
