// Ranks as forked processes for fault tests. The test process hosts the rendezvous store; each
// child connects to it, builds a Communicator and runs a body; the child's outcome (ok, or the
// kolo error it raised) comes back through a pipe with the time it happened.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/base/dtype.h"
#include "comm/bootstrap/tcp_store.h"
#include "comm/communicator.h"
#include "kolo_config.h"

namespace kolo::testing {

// The message transports the multi-process fault and mismatch tests run over: shm and tcp, and
// ucx where kolo was built with it.
inline std::vector<TransportKind> process_transports() {
  std::vector<TransportKind> kinds{TransportKind::kShm, TransportKind::kTcp};
  if (KOLO_HAVE_UCX) kinds.push_back(TransportKind::kUcx);
  return kinds;
}

struct Outcome {
  bool exited = false;  // reported before the test's deadline
  bool ok = false;      // the body returned without throwing
  std::string message;  // the error text when !ok
  double seconds = 0;   // when it reported, from job start
};

// Called by a rank's body once it is running: ForkedJob::wait_started() returns after all have.
void mark_started(Communicator& comm);

class ForkedJob {
 public:
  ForkedJob(int size, TransportKind transport, double timeout_seconds);
  ~ForkedJob();

  // Sets an environment variable in one rank's process only (before start()).
  void set_env(int rank, const std::string& name, const std::string& value) {
    env_[rank][name] = value;
  }
  // Binds one rank's process to one CPU (before it connects), as a launcher's binding does.
  void set_cpu(int rank, int cpu) { cpu_[rank] = cpu; }
  // Starts every rank (a forked process) running `body`.
  void start(const std::function<void(Communicator&, int rank)>& body);
  void kill(int rank, int signal);
  // Waits until every rank has called mark_started() (the job is past its rendezvous).
  void wait_started(double limit_seconds);
  // Collects every rank's outcome, waiting at most `limit_seconds` from start.
  std::vector<Outcome> collect(double limit_seconds);
  int store_port() const { return store_port_; }
  double elapsed() const;

 private:
  int size_;
  TransportKind transport_;
  double timeout_seconds_;
  // The store server runs in a process of its own: its thread would otherwise be inside
  // OpenSSL (a handshake) at some fork() and leave the child a lock that is never released.
  pid_t server_pid_ = -1;
  int store_port_ = 0;
  std::map<int, std::map<std::string, std::string>> env_;
  std::map<int, int> cpu_;
  std::vector<pid_t> pids_;
  std::vector<int> pipes_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace kolo::testing
