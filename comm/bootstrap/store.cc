// Store helpers, MemoryStore and PrefixStore.
#include "comm/bootstrap/store.h"

#include <algorithm>
#include <charconv>
#include <thread>

#include "comm/base/error.h"

namespace kolo::bootstrap {

void Store::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& key : keys) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    get(key, std::max(left, std::chrono::milliseconds(0)));
  }
}

void MemoryStore::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = value;
  }
  changed_.notify_all();
}

std::string MemoryStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  bool found = changed_.wait_for(lock, timeout, [&] { return values_.count(key) > 0; });
  if (!found)
    KOLO_THROW(ErrorCode::kTimeout, "store key '", key, "' was not set within ", timeout.count(),
               " ms (a rank did not arrive; KOLO_TIMEOUT_SECONDS)");
  return values_[key];
}

std::optional<std::string> MemoryStore::check(const std::string& key, std::chrono::milliseconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = values_.find(key);
  return it == values_.end() ? std::nullopt : std::optional<std::string>(it->second);
}

int64_t add_to_counter(const std::string& key, const std::string* current, int64_t delta) {
  int64_t value = 0;
  if (current != nullptr) {
    const char* end = current->data() + current->size();
    const auto parsed = std::from_chars(current->data(), end, value);
    KOLO_CHECK_ARG(parsed.ec == std::errc() && parsed.ptr == end && !current->empty(),
                   "store: add on key '", key, "', whose value is not a 64-bit integer");
  }
  int64_t sum = 0;
  KOLO_CHECK_ARG(!__builtin_add_overflow(value, delta, &sum), "store: add of ", delta, " to key '",
                 key, "' (", value, ") overflows a 64-bit integer");
  return sum;
}

int64_t MemoryStore::add(const std::string& key, int64_t delta) {
  int64_t result;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = values_.find(key);
    result = add_to_counter(key, it == values_.end() ? nullptr : &it->second, delta);
    values_[key] = std::to_string(result);
  }
  changed_.notify_all();
  return result;
}

void PrefixStore::set(const std::string& key, const std::string& value) {
  base_->set(prefix_ + "/" + key, value);
}

std::string PrefixStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  return base_->get(prefix_ + "/" + key, timeout);
}

int64_t PrefixStore::add(const std::string& key, int64_t delta) {
  return base_->add(prefix_ + "/" + key, delta);
}

void leave_setup_reason(Store& store, int rank, const std::string& who, const std::string& why) {
  try {
    const auto within = std::chrono::milliseconds(500);
    store.set_within("abort/" + std::to_string(rank), why, within);
    if (store.add("abort/count", 1) == 1) store.set_within("abort/any", who + "\n" + why, within);
  } catch (const Error&) {
    // The store may be what failed; the others then report what they see.
  }
}

void throw_if_setup_failed(Store& store, std::chrono::milliseconds timeout) {
  std::optional<std::string> any;
  try {
    any = store.check("abort/any", timeout);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kTimeout) throw;  // a store that is gone is news; a slow one not
  }
  if (!any) return;
  const std::string who = any->substr(0, any->find('\n'));
  std::string why = any->substr(std::min(any->size(), who.size() + 1));
  // A rank that failed because another gave up quotes it: the innermost reason is the cause.
  const std::string marker = "it had failed with: ";
  if (const size_t inner = why.rfind(marker); inner != std::string::npos)
    why = why.substr(inner + marker.size());
  KOLO_THROW(ErrorCode::kPeerLost, who, " gave up while setting up; it had failed with: ", why);
}

std::string wait_for_key(Store& store, const std::string& key, std::chrono::milliseconds timeout) {
  using namespace std::chrono;
  const auto deadline = steady_clock::now() + timeout;
  auto left = [&] { return duration_cast<milliseconds>(deadline - steady_clock::now()); };
  // A value that is there costs one request; a rank waiting long asks about 20 times a second.
  auto pause = milliseconds(1);
  for (;;) {
    std::optional<std::string> value;
    try {
      value = store.check(key, std::max(left(), milliseconds(1)));
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kTimeout) throw;  // a slow store: the deadline below decides
    }
    if (value) return *value;
    throw_if_setup_failed(store, std::max(left(), milliseconds(1)));
    if (left() <= milliseconds(0))
      KOLO_THROW(ErrorCode::kTimeout, "store key '", key, "' was not set within ", timeout.count(),
                 " ms (a rank did not arrive; KOLO_TIMEOUT_SECONDS)");
    std::this_thread::sleep_for(std::min(pause, left()));
    pause = std::min(2 * pause, milliseconds(50));
  }
}

void store_barrier(Store& store, const std::string& name, int size,
                   std::chrono::milliseconds timeout) {
  // The last rank to arrive publishes "<name>/done"; everyone waits for it.
  if (store.add(name + "/count", 1) == size) store.set(name + "/done", "1");
  wait_for_key(store, name + "/done", timeout);
}

std::vector<std::string> store_allgather(
    Store& store, const std::string& name, int rank, int size, const std::string& value,
    std::chrono::milliseconds timeout, const std::function<void(int, const std::string&)>& check) {
  store.set(name + "/" + std::to_string(rank), value);
  std::vector<std::string> values(static_cast<size_t>(size));
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int r = 0; r < size; ++r) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    try {
      values[static_cast<size_t>(r)] = wait_for_key(store, name + "/" + std::to_string(r),
                                                    std::max(left, std::chrono::milliseconds(0)));
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kTimeout) throw;
      KOLO_THROW(ErrorCode::kTimeout, "rank ", r, " of ", size, " did not arrive within ",
                 timeout.count(),
                 " ms (KOLO_TIMEOUT_SECONDS): not started, stuck, gone, or "
                 "told another rank or job size (",
                 e.message(), ")");
    }
    if (check) check(r, values[static_cast<size_t>(r)]);
  }
  return values;
}

void linger_before_verdict(int rank) {
  if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
}

void require_same_on_every_rank(const std::string& setting,
                                const std::vector<std::string>& per_rank, int rank,
                                const std::string& unit) {
  for (size_t r = 0; r < per_rank.size(); ++r) {
    if (per_rank[r] == per_rank[0]) continue;
    linger_before_verdict(rank);
    KOLO_THROW(ErrorCode::kMismatch, setting, " differs between ranks: rank 0 uses ", per_rank[0],
               unit, ", rank ", r, " uses ", per_rank[r], unit,
               " (every rank must use the same value)");
  }
}

}  // namespace kolo::bootstrap
