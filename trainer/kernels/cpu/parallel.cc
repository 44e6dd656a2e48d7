// The kernel pool behind parallel_for. A job is published by bumping a generation counter;
// workers wait for it in three steps: a short pause-spin (the next kernel usually follows
// within microseconds), then sched_yield (so an oversubscribed core or OpenBLAS's own
// threads, which run the GEMMs in between, keep their time), then a condition variable, so
// an idle pool costs nothing. The caller runs the first range itself and then waits for the
// others the same way.
#include "trainer/kernels/cpu/parallel.h"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace kolo::trainer::cpu {
namespace {

constexpr int kPauseSpins = 2000;                    // about 10-40 us of pause
constexpr std::chrono::microseconds kYieldFor{100};  // then yield for this long
thread_local bool tl_in_pool = false;                // a worker, or a caller inside run

class Pool {
 public:
  static Pool& get() {
    static Pool* pool = [] {
      auto* p = new Pool();  // never destroyed: workers may outlive static destructors' order
      pthread_atfork(nullptr, nullptr, [] { Pool::get().forget_workers_after_fork(); });
      return p;
    }();
    return *pool;
  }

  int threads() const { return threads_.load(std::memory_order_relaxed); }

  void resize(int n) {
    std::lock_guard<std::mutex> lock(busy_);
    if (n == threads()) return;
    stop_workers();
    threads_.store(n, std::memory_order_relaxed);
    // A worker starts from the generation of now: a job published before it first runs is
    // still one it has not seen.
    const uint64_t now = generation_.load(std::memory_order_acquire);
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, i, now] { work(i, now); });
  }

  void run(size_t n, size_t grain, RangeFn fn, void* ctx) {
    const size_t blocks = (n + grain - 1) / grain;
    std::unique_lock<std::mutex> lock(busy_, std::defer_lock);
    if (threads() == 1 || blocks < 2 || tl_in_pool || !lock.try_lock()) {
      fn(ctx, 0, n);
      return;
    }
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    grain_ = grain;
    parts_ = static_cast<int>(std::min<size_t>(blocks, static_cast<size_t>(threads())));
    error_ = nullptr;
    remaining_.store(threads() - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> sleep(sleep_mutex_);
      wake_.notify_all();
    }
    tl_in_pool = true;
    run_part(0);
    tl_in_pool = false;
    wait_until([this] { return remaining_.load(std::memory_order_acquire) == 0; });
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // Spins, then yields, until done() holds; returns false when the yield phase ran out.
  template <typename Done>
  static bool wait_until(Done done, bool forever = true) {
    for (int i = 0; i < kPauseSpins; ++i) {
      if (done()) return true;
      _mm_pause();
    }
    const auto until = std::chrono::steady_clock::now() + kYieldFor;
    while (!done()) {
      if (!forever && std::chrono::steady_clock::now() > until) return false;
      sched_yield();
    }
    return true;
  }

  void run_part(int part) {
    if (part >= parts_) return;
    const size_t blocks = (n_ + grain_ - 1) / grain_;
    const size_t first = blocks * part / parts_, last = blocks * (part + 1) / parts_;
    try {
      fn_(ctx_, first * grain_, std::min(n_, last * grain_));
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }

  void work(int index, uint64_t seen) {
    tl_in_pool = true;
    for (;;) {
      auto fresh = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      if (!wait_until(fresh, false)) {
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        std::unique_lock<std::mutex> lock(sleep_mutex_);
        wake_.wait(lock, fresh);
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
      }
      seen = generation_.load(std::memory_order_acquire);
      if (stop_.load(std::memory_order_acquire)) return;
      run_part(index);
      remaining_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  void stop_workers() {
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_seq_cst);
    {
      std::lock_guard<std::mutex> sleep(sleep_mutex_);
      wake_.notify_all();
    }
    for (std::thread& t : workers_) t.join();
    workers_.clear();
    stop_.store(false, std::memory_order_release);
  }

  // A forked child has only the forking thread: the workers' objects are left unjoined (the
  // threads do not exist there) and the pool starts again with one thread.
  void forget_workers_after_fork() {
    new std::vector<std::thread>(std::move(workers_));  // leaked on purpose: never joinable
    workers_.clear();
    threads_.store(1, std::memory_order_relaxed);
    sleepers_.store(0, std::memory_order_relaxed);
    new (&busy_) std::mutex();
    new (&sleep_mutex_) std::mutex();
    new (&wake_) std::condition_variable();
    new (&error_mutex_) std::mutex();
  }

  std::mutex busy_;  // held by the thread whose job the pool runs
  std::vector<std::thread> workers_;
  std::atomic<int> threads_{1};
  RangeFn fn_ = nullptr;
  void* ctx_ = nullptr;
  size_t n_ = 0, grain_ = 1;
  int parts_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> remaining_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace

void set_pool_threads(int n) {
  Pool::get().resize(std::max(1, n));
}
int pool_threads() {
  return Pool::get().threads();
}

void parallel_for_impl(size_t n, size_t grain, RangeFn fn, void* ctx) {
  if (n == 0) return;
  Pool::get().run(n, std::max<size_t>(grain, 1), fn, ctx);
}

}  // namespace kolo::trainer::cpu
