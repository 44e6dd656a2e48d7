// Interrupting a blocking wait from outside kolo: an embedding (the Python binding) installs a
// hook that says whether the user asked to stop (Ctrl-C), and the transports' wait loops ask it
// next to their deadline check, so that a wait ends within ~0.1 s instead of at its timeout.
#pragma once

#include <chrono>

namespace kolo {

// True when the current call should give up. Runs on the waiting thread, with no kolo lock
// that the hook could need; it may block briefly (Python: taking the GIL).
using InterruptHook = bool (*)();

// How often interrupt_requested() calls the hook: a hook may be costly (it takes the GIL), and a
// person pressing Ctrl-C does not notice 0.1 s.
inline constexpr auto kInterruptCheckInterval = std::chrono::milliseconds(100);

// Installs `hook` for the current thread for the guard's lifetime (the previous one comes back
// after it, so guards nest).
class ScopedInterruptHook {
 public:
  explicit ScopedInterruptHook(InterruptHook hook);
  ~ScopedInterruptHook();
  ScopedInterruptHook(const ScopedInterruptHook&) = delete;
  ScopedInterruptHook& operator=(const ScopedInterruptHook&) = delete;

 private:
  InterruptHook previous_;
  std::chrono::steady_clock::time_point previous_next_check_;
};

// Whether this thread's hook asks the wait to stop; false without a hook (a thread-local pointer
// test) and between the hook's checks. Waits throw kolo::Error when it is true
// (transport::Context::throw_interrupted).
bool interrupt_requested();

}  // namespace kolo
