// C10dStore: kolo's store calls (set, get with a deadline, add) on a c10d::Store.
#include "bindings/python/c10d/store.h"

#include <algorithm>
#include <exception>
#include <thread>

#include "comm/base/error.h"

namespace kolo::c10d_backend {
namespace {

// Runs a store call; torch's exceptions (c10::Error, std::runtime_error) become kolo::Error.
template <typename Fn>
auto translated(const std::string& what, const std::string& key, Fn fn) {
  try {
    return fn();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    KOLO_THROW(ErrorCode::kPeerLost, "the torch.distributed store failed in ", what, " of '", key,
               "' (the rank hosting it may be gone): ", e.what());
  }
}

}  // namespace

void C10dStore::set(const std::string& key, const std::string& value) {
  translated("set", key,
             [&] { store_->set(key, std::vector<uint8_t>(value.begin(), value.end())); });
}

std::string C10dStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  // Polled with check() rather than a blocking wait: torch's TCPStore client holds one lock
  // through a wait, and a group's send/recv channels make their communicators on it from
  // threads of their own, each waiting for keys that a peer sets only after its own wait.
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(200);
  auto last_check = start;
  while (!translated("wait", key, [&] { return store_->check({key}); })) {
    const auto now = std::chrono::steady_clock::now();
    if (now - start >= timeout)
      KOLO_THROW(ErrorCode::kTimeout, "no rank set '", key,
                 "' in the torch.distributed store within ", timeout.count(), " ms");
    if (while_waiting_ && now - last_check >= std::chrono::milliseconds(500)) {
      while_waiting_();
      last_check = now;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  std::vector<uint8_t> value = translated("get", key, [&] { return store_->get(key); });
  return std::string(value.begin(), value.end());
}

// torch's check has no timeout of its own: `timeout` is not applied.
std::optional<std::string> C10dStore::check(const std::string& key, std::chrono::milliseconds) {
  if (!translated("check", key, [&] { return store_->check({key}); })) {
    // Asked over and over by a wait (bootstrap::wait_for_key): the hook runs as in get().
    // Several threads may wait on one store: the last run's time is atomic.
    const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    int64_t last = last_hook_.load();
    const int64_t half_second = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::milliseconds(500))
                                    .count();
    if (while_waiting_ && now - last >= half_second &&
        last_hook_.compare_exchange_strong(last, now))
      while_waiting_();
    return std::nullopt;
  }
  std::vector<uint8_t> value = translated("get", key, [&] { return store_->get(key); });
  return std::string(value.begin(), value.end());
}

int64_t C10dStore::add(const std::string& key, int64_t delta) {
  return translated("add", key, [&] { return store_->add(key, delta); });
}

}  // namespace kolo::c10d_backend
