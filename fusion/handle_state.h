// The shared state behind a Handle: written once by the engine's loop thread when the op
// completes, read by any thread that holds the Handle.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "fusion/engine.h"

namespace kolo::engine {

struct Handle::State {
  std::mutex mutex;
  std::condition_variable changed;
  std::atomic<bool> done{false};
  Status status;
  // Results the engine sizes (allgather, alltoall, reduce_scatter), written before complete().
  std::vector<char> output;
  std::vector<int64_t> output_shape;
  int64_t value = -1;  // join: the last rank to join

  // The first call wins; later ones are ignored.
  void complete(Status s);
  bool is_done() const { return done.load(std::memory_order_acquire); }
  void fail(ErrorCode code, const std::string& message) {
    complete(Status::failure(code, message));
  }
  void succeed() { complete(Status::success()); }
};

}  // namespace kolo::engine
