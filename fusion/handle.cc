// Handle and its shared State, TensorView and the names of the engine's op types.
#include <thread>

#include "fusion/handle_state.h"

namespace kolo::engine {

constexpr int kSpinChecks = 50;

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
  // Most ops finish within tens of microseconds: look a few times before sleeping, which
  // saves a futex wake-up on each side.
  for (int i = 0; i < kSpinChecks; ++i) {
    if (state_->is_done()) return true;
    std::this_thread::yield();
  }
  std::unique_lock<std::mutex> lock(state_->mutex);
  return state_->changed.wait_for(lock, timeout, [&] { return state_->is_done(); });
}

bool Handle::done() const {
  KOLO_CHECK_ARG(state_ != nullptr, "done() on an empty Handle");
  return state_->is_done();
}

Status Handle::status() const {
  KOLO_CHECK_ARG(state_ != nullptr, "status() on an empty Handle");
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->status;
}

void Handle::check() const {
  while (!wait(std::chrono::hours(1))) {
  }
  Status s = status();
  if (!s.ok) throw Error(s.code, s.message);
}

const std::vector<char>& Handle::output() const {
  return state_->output;
}
std::vector<int64_t> Handle::output_shape() const {
  return state_->output_shape;
}
int64_t Handle::output_value() const {
  return state_->value;
}

}  // namespace kolo::engine
