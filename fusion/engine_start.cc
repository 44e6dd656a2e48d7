// What every rank's engine checks with the others as it starts, before its loop runs: that the
// settings which must agree do, and that every rank's timeline file opened.
#include <exception>
#include <string>
#include <vector>

#include "comm/bootstrap/store.h"
#include "fusion/engine_impl.h"

namespace kolo::engine {

void Engine::Impl::start_timeline_everywhere() {
  // Every rank learns whether every rank's file opened: a rank that could not open its own (a
  // directory, a full disk, KOLO_TIMELINE set on that rank only) failed here, and the others
  // waited for it in their first op until the timeout, with a message that did not say why.
  std::exception_ptr mine;
  if (!options_.timeline_path.empty()) {
    try {
      timeline_.start(timeline::timeline_path_for_rank(options_.timeline_path, world_->rank()),
                      world_->rank());
    } catch (const Error&) {
      mine = std::current_exception();
    }
  }
  int64_t failed = mine ? world_->rank() : -1;
  world_->allreduce(&failed, &failed, 1, DType::kInt64, ReduceOp::kMax);
  if (mine) std::rethrow_exception(mine);
  if (failed >= 0) {
    timeline_.stop();
    KOLO_THROW(ErrorCode::kIo, "rank ", failed,
               " could not open its timeline file (KOLO_TIMELINE); its own message says why");
  }
}

void Engine::Impl::check_settings_agree() {
  // Ranks that fuse or cache differently would disagree on what a response means; ranks that
  // split device sets differently would wait for each other.
  const std::pair<const char*, int64_t> settings[] = {
      {"KOLO_FUSION_THRESHOLD", static_cast<int64_t>(options_.fusion_threshold)},
      {"KOLO_CACHE_CAPACITY", static_cast<int64_t>(options_.cache_capacity)},
      {"KOLO_DEVICE_HIERARCHICAL", options_.device_hierarchical ? 1 : 0}};
  const size_t n = std::size(settings), world = static_cast<size_t>(world_->size());
  std::vector<int64_t> mine, all(n * world);
  for (const auto& setting : settings) mine.push_back(setting.second);
  world_->allgather(mine.data(), all.data(), n, DType::kInt64);
  for (size_t i = 0; i < n; ++i) {
    std::vector<std::string> per_rank;
    for (size_t r = 0; r < world; ++r) per_rank.push_back(std::to_string(all[r * n + i]));
    bootstrap::require_same_on_every_rank(settings[i].first, per_rank, world_->rank());
  }
}

}  // namespace kolo::engine
