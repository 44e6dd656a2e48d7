// Handle and its shared State, TensorView and the names of the engine's op types.
#include <algorithm>
#include <thread>

#include "fusion/handle_state.h"

namespace kolo::engine {

constexpr int kSpinChecks = 50;
// How long a waiter sleeps before it looks again whether it may run an iteration itself.
constexpr std::chrono::microseconds kHelpInterval(200);

size_t TensorView::count() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

const char* op_type_name(OpType type) {
  static const char* const kNames[] = {"allreduce",      "allgather", "broadcast", "alltoall",
                                       "reduce_scatter", "barrier",   "join"};
  return kNames[static_cast<int>(type)];
}

void Handle::State::complete(Status s) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (done) return;
    status = std::move(s);
    done.store(true, std::memory_order_release);
  }
  changed.notify_all();
}

bool Handle::wait(std::chrono::milliseconds timeout) const {
  KOLO_CHECK_ARG(state_ != nullptr, "wait on an empty Handle");
  if (state_->is_done()) return true;  // most handles of a step: no clock read
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  struct Waiting {
    Driver* driver;
    explicit Waiting(Driver* d) : driver(d) {
      if (driver) ++driver->waiters;
    }
    ~Waiting() {
      if (!driver) return;
      driver->touch();  // the application was here until now
      --driver->waiters;
    }
  } waiting(state_->driver.get());
  while (!state_->is_done()) {
    // Run the engine's next iteration here when no other thread is running one. Iterations
    // that run while the op cannot complete (a peer has not submitted it) may follow each
    // other without end: the deadline is looked at after each.
    if (state_->driver && state_->driver->help(*state_->driver)) {
      if (std::chrono::steady_clock::now() >= deadline) return state_->is_done();
      continue;
    }
    // Another thread is: look a few times (it usually finishes within microseconds, and a
    // futex wake-up on each side costs more), then sleep until done or a moment has passed.
    for (int i = 0; i < kSpinChecks && !state_->is_done(); ++i) std::this_thread::yield();
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return state_->is_done();
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->changed.wait_for(
        lock, std::min<std::chrono::steady_clock::duration>(deadline - now, kHelpInterval),
        [&] { return state_->is_done(); });
  }
  return true;
}

bool Handle::done() const {
  KOLO_CHECK_ARG(state_ != nullptr, "done() on an empty Handle");
  return state_->is_done();
}

Status Handle::status() const {
  KOLO_CHECK_ARG(state_ != nullptr, "status() on an empty Handle");
  if (state_->is_done()) return state_->status;  // written once, before done
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->status;
}

void Handle::check() const {
  while (!wait(std::chrono::hours(1))) {
  }
  const Status& s = state_->status;  // done: never written again (State::complete)
  if (!s.ok) throw Error(s.code, s.message);
}

const std::vector<char>& Handle::output() const {
  return state_->output;
}
void* Handle::device_output() const {
  return state_->device_output.get();
}
std::vector<int64_t> Handle::output_shape() const {
  return state_->output_shape;
}
int64_t Handle::output_value() const {
  return state_->value;
}

}  // namespace kolo::engine
