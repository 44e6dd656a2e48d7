// The waiting pace of transports that poll for completions (mpi, ucx): a few tight tests, then
// yields for a short window (pieces of a moving transfer complete well within it), then sleeps
// doubling up to 1 ms. Ranks may outnumber cores, so a waiter never spins for long.
#pragma once

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>

namespace kolo::transport {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;

  void progressed(Clock::time_point now) {
    idle_tests_ = 0;
    since_ = now;
    sleep_ = kFirstSleep;
  }
  void pause() {
    if (++idle_tests_ <= kTightTests) return;
    if (Clock::now() - since_ < kYieldWindow) {
      sched_yield();
      return;
    }
    timespec ts{0, static_cast<long>(sleep_.count())};
    nanosleep(&ts, nullptr);
    sleep_ = std::min(sleep_ * 2, kMaxSleep);
  }

 private:
  static constexpr int kTightTests = 16;
  static constexpr auto kYieldWindow = std::chrono::microseconds(200);
  static constexpr std::chrono::nanoseconds kFirstSleep = std::chrono::microseconds(10);
  static constexpr std::chrono::nanoseconds kMaxSleep = std::chrono::milliseconds(1);

  int idle_tests_ = 0;
  Clock::time_point since_ = Clock::now();
  std::chrono::nanoseconds sleep_ = kFirstSleep;
};

}  // namespace kolo::transport
