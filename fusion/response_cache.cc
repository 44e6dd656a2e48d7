// ResponseCache: name -> position, positions stable until evicted (oldest insertion first).
#include "fusion/response_cache.h"

#include <algorithm>

namespace kolo::engine {

bool ResponseCache::cacheable(const Response& r) {
  return r.kind == Response::Kind::kExecute && r.joined.empty() && r.names.size() == 1 &&
         (r.type == OpType::kAllreduce || r.type == OpType::kBroadcast ||
          r.type == OpType::kReduceScatter);
}

std::optional<size_t> ResponseCache::lookup(const Request& request) const {
  auto it = position_.find(request.name);
  if (it == position_.end() || !entries_[it->second].response.params.same_signature(request))
    return std::nullopt;
  return it->second;
}

void ResponseCache::put(const Response& response) {
  if (capacity_ == 0 || !cacheable(response)) return;
  const std::string& name = response.names[0];
  Entry entry{response, ++clock_};
  if (auto it = position_.find(name); it != position_.end()) {
    entries_[it->second] = std::move(entry);
    return;
  }
  if (entries_.size() < capacity_) {
    position_[name] = entries_.size();
    entries_.push_back(std::move(entry));
    return;
  }
  auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                 [](auto& a, auto& b) { return a.inserted < b.inserted; });
  position_.erase(oldest->response.names[0]);
  position_[name] = static_cast<size_t>(oldest - entries_.begin());
  *oldest = std::move(entry);
}

}  // namespace kolo::engine
