// The response cache: names negotiated before skip the gather-and-broadcast round. Every rank
// keeps an identical cache (entries are added and evicted only from responses that all ranks
// execute, in the same order), so a cache position means the same tensor everywhere. Each
// cycle, every rank marks the positions of its pending requests that match their entry, and one
// MIN-allreduce of those bytes finds the tensors ready on every rank.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fusion/request.h"

namespace kolo::engine {

class ResponseCache {
 public:
  explicit ResponseCache(size_t capacity) : capacity_(capacity) {}
  size_t capacity() const { return capacity_; }
  size_t size() const { return entries_.size(); }  // positions in use: [0, size())

  // Only responses whose every field follows from the request are cached (allreduce,
  // broadcast, reducescatter without joined ranks).
  static bool cacheable(const Response& response);

  // The position holding this request's response if the parameters still match.
  std::optional<size_t> lookup(const Request& request) const;
  const Response& at(size_t position) const { return entries_[position].response; }
  // Adds or replaces the entry for the response's name; evicts the oldest when full.
  void put(const Response& response);

 private:
  struct Entry {
    Response response;
    uint64_t inserted = 0;
  };
  size_t capacity_;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> position_;
  uint64_t clock_ = 0;
};

}  // namespace kolo::engine
