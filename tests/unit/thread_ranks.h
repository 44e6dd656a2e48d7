// Runs a function on `size` ranks that are threads of this process, each with its own
// Communicator over one shared MemoryStore; returns each rank's result in rank order.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "comm/bootstrap/store.h"
#include "comm/communicator.h"

namespace kolo::testing {

// A rank's Communicator as a shared_ptr that does not own it (an Engine takes a shared_ptr).
inline std::shared_ptr<Communicator> borrowed(Communicator& comm) {
  return std::shared_ptr<Communicator>(&comm, [](Communicator*) {});
}

template <typename Fn>
auto run_thread_ranks(int size, TransportKind transport, Fn fn, CommunicatorOptions options = {}) {
  using Result = decltype(fn(std::declval<Communicator&>()));
  auto store = std::make_shared<bootstrap::MemoryStore>();
  options.transport = transport;
  std::vector<Result> results(static_cast<size_t>(size));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm = Communicator::create(store, r, size, options);
        results[static_cast<size_t>(r)] = fn(*comm);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return results;
}

}  // namespace kolo::testing
