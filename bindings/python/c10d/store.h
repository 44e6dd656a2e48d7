// The c10d::Store that torch hands a backend's creator, seen as kolo's rendezvous store: a kolo
// process group builds its Communicator on it, so every init_method torch knows (env://, tcp://,
// file://, a store) and new_group() (a store prefixed per group) work without kolo's launcher.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "comm/bootstrap/store.h"

namespace kolo::c10d_backend {

// Failures of torch's store become kolo::Error: kTimeout when a get waited its whole timeout,
// kPeerLost otherwise (the store is hosted by a rank, and a broken connection means it is gone).
class C10dStore : public bootstrap::Store {
 public:
  // `while_waiting`, when given, runs about twice a second while a get waits for its key; it
  // throws (kolo::Error) to end the wait, e.g. when the rank expected to set the key is gone.
  explicit C10dStore(c10::intrusive_ptr<::c10d::Store> store,
                     std::function<void()> while_waiting = {})
      : store_(std::move(store)), while_waiting_(std::move(while_waiting)) {}

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::optional<std::string> check(const std::string& key,
                                   std::chrono::milliseconds timeout) override;

 private:
  c10::intrusive_ptr<::c10d::Store> store_;
  std::function<void()> while_waiting_;
  std::atomic<int64_t> last_hook_{std::chrono::steady_clock::now().time_since_epoch().count()};
};

}  // namespace kolo::c10d_backend
