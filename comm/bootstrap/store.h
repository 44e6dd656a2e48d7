// The rendezvous store (like c10d's Store): a small key-value service that ranks use to find
// each other before any transport exists. MemoryStore serves ranks that are threads of one
// process; TcpStore (tcp_store.h) serves processes, hosted by rank 0.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kolo::bootstrap {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Waits until `key` exists, then returns its value; kTimeout after `timeout`.
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Atomically adds `delta` to the integer at `key` (0 when missing); returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;

  // The value of `key` if it is set now, without waiting for it (the request itself is bounded
  // by `timeout`: kTimeout when the store does not answer in time).
  virtual std::optional<std::string> check(const std::string& key,
                                           std::chrono::milliseconds timeout) = 0;
  // Waits until every key exists.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  // Best-effort set bounded by `timeout`, for error paths where the store may be gone.
  virtual void set_within(const std::string& key, const std::string& value,
                          std::chrono::milliseconds /*timeout*/) {
    set(key, value);
  }
  // This process's end of its connection to the store ("" where there is none): an address on
  // the interface that routes to rank 0's host, which the other hosts are likely to reach too.
  virtual std::string local_address() { return ""; }
};

// Ranks as threads: one MemoryStore shared by every rank's Communicator.
class MemoryStore : public Store {
 public:
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::optional<std::string> check(const std::string& key, std::chrono::milliseconds) override;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

// Namespaces keys ("<prefix>/<key>") so that communicators created by split do not collide.
class PrefixStore : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix)
      : base_(std::move(base)), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::optional<std::string> check(const std::string& key,
                                   std::chrono::milliseconds timeout) override {
    return base_->check(prefix_ + "/" + key, timeout);
  }
  std::string local_address() override { return base_->local_address(); }
  void set_within(const std::string& key, const std::string& value,
                  std::chrono::milliseconds timeout) override {
    base_->set_within(prefix_ + "/" + key, value, timeout);
  }
  const std::string& prefix() const { return prefix_; }
  const std::shared_ptr<Store>& base() const { return base_; }

 private:
  std::shared_ptr<Store> base_;
  std::string prefix_;
};

// Every rank calls it with the same `name`; returns when all `size` ranks have arrived.
void store_barrier(Store& store, const std::string& name, int size,
                   std::chrono::milliseconds timeout);

// Every rank publishes `value`; returns all ranks' values in rank order. `check`, when given,
// sees each rank's value as it arrives (it may throw before later ranks are waited for). A rank
// that does not come within `timeout` is a kTimeout naming it.
std::vector<std::string> store_allgather(
    Store& store, const std::string& name, int rank, int size, const std::string& value,
    std::chrono::milliseconds timeout,
    const std::function<void(int, const std::string&)>& check = {});

// A rank that gives up while setting up a communicator (a bad setting, a transport that will
// not start) leaves its reason in the communicator's store, best effort within half a second:
// "abort/<rank>", and the first such rank also "abort/any" ("<who>\n<why>"), which every
// setup wait of the others looks at (wait_for_key), so that they fail at once quoting it
// instead of waiting out their timeout for a rank that "did not arrive".
// `who` names the rank in the others' messages ("rank 1 (world rank 2)").
void leave_setup_reason(Store& store, int rank, const std::string& who, const std::string& why);

// Throws kPeerLost "<who> gave up while setting up; it had failed with: <its innermost
// reason>" when some rank left a setup reason; one look, bounded by `timeout`.
void throw_if_setup_failed(Store& store, std::chrono::milliseconds timeout);

// The value of `key` once it is set, within `timeout` (kTimeout after it): non-blocking looks
// at growing intervals (1 ms to 50 ms), each also at "abort/any" (throw_if_setup_failed).
std::string wait_for_key(Store& store, const std::string& key, std::chrono::milliseconds timeout);

// The value of an add(): `current` (a key's value, empty when absent) plus delta. Refuses
// (kInvalidArgument, naming the key) a value that is not a 64-bit integer and a sum that
// overflows, instead of throwing std::invalid_argument out of a server loop.
int64_t add_to_counter(const std::string& key, const std::string* current, int64_t delta);

// Rank 0 holds the rendezvous store: before it throws a verdict that every rank reaches from the
// same gathered values, it lingers half a second, so that a rank still reading does not lose
// the store and report a lost peer instead of the verdict.
void linger_before_verdict(int rank);

// A setting every rank must share, as each rank reported it (per_rank[r], e.g. gathered through
// the store): throws kMismatch "<setting> differs between ranks: rank 0 uses A, rank r uses
// B" on every rank when they differ (rank 0 after linger_before_verdict).
// `unit` follows each value in the message (" bytes").
void require_same_on_every_rank(const std::string& setting,
                                const std::vector<std::string>& per_rank, int rank,
                                const std::string& unit = "");

}  // namespace kolo::bootstrap
