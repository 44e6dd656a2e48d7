// ParamGatherer: per-group engine allgathers of the owners' ranges, use counts, the recorded
// acquire order and the prefetch that follows it.
#include "trainer/dist/param_gatherer.h"

#include <algorithm>

#include "comm/base/error.h"

namespace kolo::trainer {

ParamGatherer::ParamGatherer(engine::Engine& engine, Model& model, Partition own,
                             size_t persistence_threshold, size_t prefetch_elements)
    : engine_(engine),
      model_(model),
      own_(own),
      persistence_threshold_(persistence_threshold),
      prefetch_elements_(prefetch_elements) {}

ParamGatherer::Group& ParamGatherer::group(const std::string& prefix) {
  auto it = groups_.find(prefix);
  if (it != groups_.end()) return it->second;
  Group g;
  g.begin = model_.layout().total();
  for (const ParamInfo& p : model_.layout().params()) {
    if (p.name.compare(0, prefix.size(), prefix) != 0) continue;
    g.begin = std::min(g.begin, p.offset);
    g.end = std::max(g.end, p.offset + p.numel);
  }
  KOLO_CHECK_ARG(g.end > g.begin, "ZeRO stage 3: the model announced parameters '", prefix,
                 "...', but no tensor of its layout has that prefix");
  return groups_.emplace(prefix, g).first->second;
}

void ParamGatherer::start(const std::string& prefix, Group& g) {
  // This rank's part of the group (often empty: most groups lie inside one owner's range).
  const size_t first = std::min(g.end, std::max(g.begin, own_.begin));
  const size_t last = std::max(first, std::min(g.end, own_.end));
  char* base = static_cast<char*>(model_.params());
  const size_t esize = dtype_size(model_.dtype());
  engine::TensorView mine{base + first * esize,
                          model_.dtype(),
                          {static_cast<int64_t>(last - first)},
                          model_.backend().device_id(),
                          model_.backend().device_stream()};
  g.handle = engine_.allgather("zero3." + prefix, mine);
  g.in_flight = true;
}

void ParamGatherer::complete(Group& g) {
  g.handle.check();
  g.in_flight = false;
  const std::vector<int64_t> shape = g.handle.output_shape();
  KOLO_CHECK_EQ(shape.empty() ? 0 : static_cast<size_t>(shape[0]), g.end - g.begin,
                ErrorCode::kInternal, "ZeRO stage 3: gathered elements of a parameter group");
  // The result in host memory, or in device memory for a model on a device.
  const char* all = g.handle.device_output() != nullptr
                        ? static_cast<const char*>(g.handle.device_output())
                        : g.handle.output().data();
  // Everything but this rank's own range, which only this rank writes (the optimizer).
  char* base = static_cast<char*>(model_.params());
  const DType dt = model_.dtype();
  const size_t esize = dtype_size(dt);
  const size_t cut1 = std::min(g.end, std::max(g.begin, own_.begin));
  const size_t cut2 = std::max(g.begin, std::min(g.end, own_.end));
  Backend& backend = model_.backend();
  backend.convert(base + g.begin * esize, dt, all, dt, cut1 - g.begin);
  backend.convert(base + cut2 * esize, dt, all + (cut2 - g.begin) * esize, dt, g.end - cut2);
  g.handle = engine::Handle();  // frees the engine's copy of the group
  g.resident = true;
}

void ParamGatherer::release(const Group& g) {
  const size_t esize = dtype_size(model_.dtype());
  char* base = static_cast<char*>(model_.params());
  auto discard = [&](size_t begin, size_t end) {  // [begin, end) less this rank's range
    const size_t cut1 = std::min(end, std::max(begin, own_.begin));
    const size_t cut2 = std::max(begin, std::min(end, own_.end));
    model_.backend().discard(base + begin * esize, (cut1 - begin) * esize);
    model_.backend().discard(base + cut2 * esize, (end - cut2) * esize);
  };
  // Consecutive tensors (and the zero padding between them) in one piece, so that the pages
  // they share go back too.
  size_t begin = 0, end = 0;
  for (const ParamInfo& p : model_.layout().params()) {
    if (p.offset < g.begin || p.offset >= g.end || p.numel < persistence_threshold_) continue;
    if (p.offset > end + ParamLayout::kAlign || end == 0) {
      if (end > begin) discard(begin, end);
      begin = p.offset;
    }
    end = p.offset + p.numel;
  }
  if (end > begin) discard(begin, end);
}

void ParamGatherer::prefetch_after(size_t position) {
  size_t ahead = 0;
  for (size_t i = position + 1; i < trace_.size(); ++i) {
    Group& g = group(trace_[i]);
    if (g.resident || g.in_flight) continue;
    ahead += g.end - g.begin;
    if (ahead > prefetch_elements_) return;
    start(trace_[i], g);
    ++prefetched_;
    return;  // one group ahead
  }
}

void ParamGatherer::use(const std::string& prefix, bool acquire) {
  Group& g = group(prefix);
  if (!acquire) {
    if (--g.uses > 0) return;
    release(g);
    g.resident = false;
    return;
  }
  const size_t position = recording_.size();
  recording_.push_back(prefix);
  if (g.uses++ == 0 && !g.resident) {
    if (!g.in_flight) start(prefix, g);
    complete(g);
  }
  if (prefetch_elements_ > 0 && position < trace_.size() && trace_[position] == prefix)
    prefetch_after(position);
}

void ParamGatherer::next_pass() {
  if (!recording_.empty()) trace_.swap(recording_);
  recording_.clear();
  // A prefetch the last pass did not use: finished and dropped, so nothing lands later.
  for (auto& [prefix, g] : groups_) {
    if (g.uses > 0) continue;
    if (g.in_flight) complete(g);
    if (g.resident) release(g);
    g.resident = false;
  }
}

void ParamGatherer::release_all() {
  for (auto& [prefix, g] : groups_) {
    KOLO_CHECK_ARG(g.uses == 0 && !g.in_flight, "ZeRO stage 3: parameters '", prefix,
                   "...' are still in use");
    g.resident = false;
  }
  Group whole;
  whole.end = model_.layout().total();
  release(whole);
}

size_t ParamGatherer::resident_bytes() const {
  size_t elements = own_.end - own_.begin;
  for (const ParamInfo& p : model_.layout().params()) {
    if (p.numel >= persistence_threshold_) continue;
    const size_t lo = std::max(p.offset, own_.begin), hi = std::min(p.offset + p.numel, own_.end);
    elements += p.numel - (hi > lo ? hi - lo : 0);
  }
  return elements * dtype_size(model_.dtype());
}

}  // namespace kolo::trainer
