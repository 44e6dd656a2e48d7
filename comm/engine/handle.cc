// Handle, its shared State, TensorView and the small helpers of the engine's public types.
#include <thread>

#include "comm/base/env.h"
#include "comm/engine/state.h"

namespace kolo::engine {

constexpr int kSpinChecks = 50;

size_t TensorView::count() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

const char* op_type_name(OpType type) {
  static const char* const kNames[] = {"allreduce",     "allgather", "broadcast", "alltoall",
                                       "reducescatter", "barrier",   "join"};
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
  return state_->is_done();
}

Status Handle::status() const {
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

EngineOptions EngineOptions::from_env() {
  EngineOptions o;
  o.fusion_threshold = static_cast<size_t>(env::get_int(
      "KOLO_FUSION_THRESHOLD", static_cast<int64_t>(o.fusion_threshold), 0, int64_t(1) << 34));
  o.cycle_time_ms = env::get_double("KOLO_CYCLE_TIME_MS", o.cycle_time_ms, 0, 10000);
  o.cache_capacity = static_cast<size_t>(
      env::get_int("KOLO_CACHE_CAPACITY", static_cast<int64_t>(o.cache_capacity), 0, 1 << 20));
  o.stall_check_seconds =
      env::get_double("KOLO_STALL_CHECK_SECONDS", o.stall_check_seconds, 0, 1e9);
  o.stall_shutdown_seconds =
      env::get_double("KOLO_STALL_SHUTDOWN_SECONDS", o.stall_shutdown_seconds, 0, 1e9);
  o.timeline_path = env::get_or("KOLO_TIMELINE", "");
  return o;
}

ProcessSet::ProcessSet(int id_, std::shared_ptr<Communicator> comm_, const EngineOptions& options)
    : id(id_), comm(std::move(comm_)), cache(options.cache_capacity) {
  if (comm->rank() == 0)
    coordinator = std::make_unique<Coordinator>(comm->size(), options.stall_check_seconds,
                                                options.stall_shutdown_seconds);
}

void ProcessSet::remove(const std::string& name) {
  pending.erase(name);
  std::erase(order, name);
}

}  // namespace kolo::engine
