// The current thread's interrupt hook and the rate at which waits may call it.
#include "comm/base/interrupt.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;

// Per thread: a wait on one thread answers only the hook of the call that thread runs.
thread_local InterruptHook t_hook = nullptr;
thread_local Clock::time_point t_next_check{};

}  // namespace

ScopedInterruptHook::ScopedInterruptHook(InterruptHook hook)
    : previous_(t_hook), previous_next_check_(t_next_check) {
  t_hook = hook;
  // The first check one interval in: most waits end sooner and never pay for the hook.
  t_next_check = Clock::now() + kInterruptCheckInterval;
}

ScopedInterruptHook::~ScopedInterruptHook() {
  t_hook = previous_;
  t_next_check = previous_next_check_;
}

bool interrupt_requested() {
  if (t_hook == nullptr) return false;
  const auto now = Clock::now();
  if (now < t_next_check) return false;
  t_next_check = now + kInterruptCheckInterval;
  return t_hook();
}

}  // namespace kolo
