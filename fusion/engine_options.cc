// EngineOptions::from_env: the engine's KOLO_* settings, each checked against its range.
#include "comm/base/env.h"
#include "comm/base/error.h"
#include "comm/bootstrap/host.h"
#include "fusion/engine.h"

namespace kolo::engine {

EngineOptions EngineOptions::from_env() {
  EngineOptions o;
  o.fusion_threshold = static_cast<size_t>(env::get_int(
      "KOLO_FUSION_THRESHOLD", static_cast<int64_t>(o.fusion_threshold), 0, int64_t(1) << 34));
  o.cycle_time_ms = env::get_double("KOLO_CYCLE_TIME_MS", o.cycle_time_ms, 0, 10000);
  const std::string progress = env::get_or("KOLO_ENGINE_PROGRESS", "auto");
  KOLO_CHECK_ARG(progress == "auto" || progress == "thread" || progress == "waiter",
                 "KOLO_ENGINE_PROGRESS='", progress, "' is not one of auto, thread, waiter");
  o.progress = progress == "thread"   ? Progress::kThread
               : progress == "waiter" ? Progress::kWaiter
                                      : Progress::kAuto;
  o.waiter_grace_ms = env::get_double("KOLO_WAITER_GRACE_MS", o.waiter_grace_ms, 0, 10000);
  o.cache_capacity = static_cast<size_t>(
      env::get_int("KOLO_CACHE_CAPACITY", static_cast<int64_t>(o.cache_capacity), 0, 1 << 20));
  o.stall_check_seconds =
      env::get_double("KOLO_STALL_CHECK_SECONDS", o.stall_check_seconds, 0, 1e9);
  o.stall_shutdown_seconds =
      env::get_double("KOLO_STALL_SHUTDOWN_SECONDS", o.stall_shutdown_seconds, 0, 1e9);
  o.timeline_path = env::get_or("KOLO_TIMELINE", "");
  KOLO_CHECK_ARG(
      o.timeline_path.empty() || o.timeline_path.find_first_not_of(" \t\n") != std::string::npos,
      "KOLO_TIMELINE='", o.timeline_path, "' is blank: name a file, or unset it");
  o.device_hierarchical = env::get_bool("KOLO_DEVICE_HIERARCHICAL", o.device_hierarchical);
  return o;
}

bool waiters_drive(EngineOptions::Progress progress, int local_size, int host_cpus) {
  return progress == EngineOptions::Progress::kWaiter ||
         (progress == EngineOptions::Progress::kAuto &&
          (local_size >= host_cpus || bootstrap::usable_cpus() <= 1));
}

}  // namespace kolo::engine
