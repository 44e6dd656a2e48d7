// Engine internals shared by the loop (engine.cc) and the executor (executor.cc): the shared
// state behind a Handle, a submitted op as this rank holds it, and a process set.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/engine/coordinator.h"
#include "comm/engine/engine.h"
#include "comm/engine/request.h"
#include "comm/engine/response_cache.h"

namespace kolo::engine {

struct Handle::State {
  std::mutex mutex;
  std::condition_variable changed;
  std::atomic<bool> done{false};
  Status status;
  std::vector<char> output;
  std::vector<int64_t> output_shape;
  int64_t value = -1;

  void complete(Status s);
  bool is_done() const { return done.load(std::memory_order_acquire); }
  void fail(ErrorCode code, const std::string& message) { complete({code, false, message}); }
  void succeed() { complete({ErrorCode::kInternal, true, ""}); }
};

struct Pending {
  Request request;
  TensorView input, output;
  std::shared_ptr<Handle::State> state;
};

struct ProcessSet {
  int id = 0;
  std::shared_ptr<Communicator> comm;  // the engine's own: never used by the application
  ResponseCache cache;
  std::unique_ptr<Coordinator> coordinator;  // on the set's rank 0
  std::map<std::string, Pending> pending;    // by name
  std::vector<std::string> order;            // names in submission order
  bool joined = false;
  std::shared_ptr<Handle::State> join_state;

  ProcessSet(int id, std::shared_ptr<Communicator> comm, const EngineOptions& options);
  void remove(const std::string& name);
};

}  // namespace kolo::engine
