// The shared state behind a Handle: written once by the engine's loop thread when the op
// completes, read by any thread that holds the Handle.
#pragma once

#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "fusion/engine.h"

namespace kolo::engine {

// Who runs the engine's loop iterations: the loop thread, or a thread waiting for a handle
// (Handle::wait), which then does the engine's work itself instead of waking the loop thread
// and sleeping until it is scheduled (on busy cores, a wake-up can come a whole time slice
// late). `mutex` is held for the length of an iteration, so one thread at a time drives the
// process sets; `impl` is cleared, under it, when the engine goes.
struct Driver {
  std::mutex mutex;
  Engine::Impl* impl = nullptr;
  // Runs one iteration on the calling thread if no other thread runs one and the engine is
  // alive; true when it ran one (Engine::Impl::help, set by the engine: a handle does not link
  // the engine in).
  bool (*help)(Driver&) = nullptr;
  // Threads inside Handle::wait: while there are any, they drive and the loop thread stays out
  // of their way (taking over a cycle from a waiter costs it a wake-up).
  std::atomic<int> waiters{0};
  // When an application thread last submitted an op or finished waiting for one
  // (steady_clock ticks): the loop thread of a rank without a spare core defers to it
  // (EngineOptions::Progress::kWaiter). Read from CLOCK_MONOTONIC_COARSE, steady_clock's base
  // at a few ms of resolution, in a quarter of the time: every submission touches, and the
  // grace it is compared with is tens of ms.
  std::atomic<int64_t> touched{0};
  void touch() {
    timespec now;
    ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    touched.store(int64_t{now.tv_sec} * 1000000000 + now.tv_nsec, std::memory_order_relaxed);
  }
};

struct Handle::State {
  std::mutex mutex;
  std::condition_variable changed;
  std::atomic<bool> done{false};
  Status status;  // final once done is set: read without the mutex from then on
  // Results the engine sizes (allgather, alltoall, reduce_scatter), written before complete().
  std::vector<char> output;
  std::vector<int64_t> output_shape;
  std::shared_ptr<void> device_output;  // the same results of a device tensor, in device memory
  int64_t value = -1;                   // join: the last rank to join
  std::shared_ptr<Driver> driver;       // null: waits only wait

  // The first call wins; later ones are ignored.
  void complete(Status s);
  bool is_done() const { return done.load(std::memory_order_acquire); }
  void fail(ErrorCode code, const std::string& message) {
    complete(Status::failure(code, message));
  }
  void succeed() { complete(Status::success()); }
};

}  // namespace kolo::engine
