// Engine::Impl's process sets: adding one (a split of the world communicator, activated at the
// same world cycle on every rank), removing one (its communicator freed at the same world cycle
// on every rank), and the checks that an op's set exists here.
#include <algorithm>

#include "comm/base/text.h"
#include "comm/bootstrap/store.h"
#include "fusion/engine_impl.h"

namespace kolo::engine {
namespace {

// A collective of add_process_set or remove_process_set on the world communicator; its error
// (a timeout, a lost rank, ranks in different calls) names the call, not only "allgather of
// 24 B".
template <typename Fn>
auto in_call(const std::string& call, Fn fn) {
  try {
    return fn();
  } catch (const Error& e) {
    KOLO_THROW(e.code(), call, ": ", e.message());
  }
}

}  // namespace

int Engine::Impl::add_process_set(const std::vector<int>& ranks) {
  check_process();
  // Two threads' calls would interleave their collectives on the world communicator.
  std::lock_guard<std::mutex> registry(registry_mutex_);
  int id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = static_cast<int>(sets_.size());
  }
  // Every rank's list is compared before anything is split, and checked after: ranks that pass
  // different lists, or one that is not a set of this job's ranks, fail the same way everywhere
  // (splitting by each rank's own list would give each its own set, silently).
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  const std::string text = "[" + join_text(sorted) + "]";
  const std::string call = "add_process_set(" + text + ")";
  bootstrap::require_same_on_every_rank(
      "the ranks of process set " + std::to_string(id),
      in_call(call, [&] { return allgather_bytes(*world_, text); }), world_->rank());
  const int world = world_->size();
  KOLO_CHECK_ARG(!sorted.empty(), "add_process_set: a process set needs at least one rank");
  for (size_t i = 0; i < sorted.size(); ++i) {
    KOLO_CHECK_ARG(sorted[i] >= 0 && sorted[i] < world, "add_process_set: ", sorted[i],
                   " is not a rank of this job of ", world, " (ranks ", text, ")");
    KOLO_CHECK_ARG(i == 0 || sorted[i] != sorted[i - 1], "add_process_set: rank ", sorted[i],
                   " is given twice (ranks ", text, ")");
  }
  const bool member = std::binary_search(sorted.begin(), sorted.end(), world_->rank());
  std::shared_ptr<Communicator> comm;
  std::exception_ptr failure;
  try {
    comm =
        in_call(call, [&] { return world_->split(member ? 1 : kUndefinedColor, world_->rank()); });
  } catch (const Error&) {
    failure = std::current_exception();
  }
  // Every rank learns whether the members made the set's communicator: where one could not, the
  // ranks outside the set (whose split returned at once) added a set the members did not.
  int32_t failed = failure ? world_->rank() : -1;
  in_call(call, [&] { world_->allreduce(&failed, &failed, 1, DType::kInt32, ReduceOp::kMax); });
  if (failure) std::rethrow_exception(failure);
  if (failed >= 0)
    KOLO_THROW(ErrorCode::kPeerLost, call, ": rank ", failed,
               " could not make the set's communicator (its error says why); no set is added");
  std::lock_guard<std::mutex> lock(mutex_);
  sets_.push_back(member ? std::make_shared<ProcessSet>(id, comm, options_, sorted) : nullptr);
  set_ranks_.push_back(text);
  removed_.push_back(false);
  return id;
}

void Engine::Impl::remove_process_set(int id) {
  check_process();
  std::lock_guard<std::mutex> registry(registry_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    KOLO_CHECK_ARG(id != 0, "remove_process_set: the global process set (0) cannot be removed");
    KOLO_CHECK_ARG(id > 0 && id < static_cast<int>(sets_.size()),
                   "remove_process_set: process set ", id, " does not exist (", sets_.size(),
                   " registered on rank ", world_->rank(), ")");
    KOLO_CHECK_ARG(!removed_[static_cast<size_t>(id)], "remove_process_set: process set ", id,
                   " was removed already");
  }
  // Collective, like add_process_set: ranks that remove different sets would each free another
  // communicator at the agreed cycle.
  const std::string call = "remove_process_set(" + std::to_string(id) + ")";
  bootstrap::require_same_on_every_rank(
      "the process set removed",
      in_call(call, [&] { return allgather_bytes(*world_, std::to_string(id)); }), world_->rank());
  std::lock_guard<std::mutex> lock(mutex_);
  removed_[static_cast<size_t>(id)] = true;
  removals_.push_back(id);
}

void Engine::Impl::retire_next_removed() {
  std::shared_ptr<ProcessSet> set;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const int id = removals_[retired_++];
    set = std::move(sets_[static_cast<size_t>(id)]);
    active_.erase(id);
    barriers_.erase(id);
    if (!set) return;  // not a member here
    const std::string why = removed_text(id) + " while the op was pending";
    for (auto& [name, p] : set->pending) p.state->fail(ErrorCode::kInvalidArgument, why);
    set->pending.clear();
    if (set->join_state) set->join_state->fail(ErrorCode::kInvalidArgument, why);
    set->join_state.reset();
  }
  // This iteration's copy of the sets may still hold it: without its communicator it is skipped,
  // and it is freed with the copy.
  set->comm.reset();
}

std::string Engine::Impl::removed_text(int set) const {
  return "process set " + std::to_string(set) + " (ranks " + set_ranks_[static_cast<size_t>(set)] +
         ") was removed (remove_process_set)";
}

// The set exists, was not removed, and this rank is one of its members (under mutex_).
void Engine::Impl::check_set(int set) {
  KOLO_CHECK_ARG(set >= 0 && set < static_cast<int>(sets_.size()), "process set ", set,
                 " does not exist (", sets_.size(), " registered on rank ", world_->rank(), ")");
  KOLO_CHECK_ARG(!removed_[static_cast<size_t>(set)], removed_text(set));
  KOLO_CHECK_ARG(sets_[set] != nullptr, "rank ", world_->rank(), " is not a member of process set ",
                 set, " (ranks ", set_ranks_[set], ")");
}

}  // namespace kolo::engine
