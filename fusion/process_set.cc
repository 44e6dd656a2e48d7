// ProcessSet: construction (the coordinator lives on the set's rank 0) and its pending ops.
#include "fusion/process_set.h"

#include <algorithm>

namespace kolo::engine {

ProcessSet::ProcessSet(int id_, std::shared_ptr<Communicator> comm_, const EngineOptions& options,
                       std::vector<int> world_ranks)
    : id(id_), comm(std::move(comm_)), cache(options.cache_capacity) {
  // A quarter of the stall warning's delay (at most 1 s): the warning comes little later than
  // for an uncached op, and a cached op that waits briefly for a slower rank stays a cache hit.
  double renegotiate = std::min(1.0, options.stall_check_seconds / 4);
  if (options.stall_shutdown_seconds > 0)
    renegotiate = std::min(renegotiate, options.stall_shutdown_seconds / 4);
  renegotiate_after = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(renegotiate));
  // Set per iteration (Engine::Impl::iterate): the loop thread, which shares its cores with the
  // application's compute, sleeps while it waits for peers; a thread waiting for a handle,
  // which has nothing else to do, may spin first.
  comm->set_busy_polling(false);
  if (comm->rank() == 0)
    coordinator =
        std::make_unique<Coordinator>(comm->size(), std::move(world_ranks),
                                      options.stall_check_seconds, options.stall_shutdown_seconds);
}

void ProcessSet::hold(Pending& op) {
  if (spare_.empty()) {
    const std::string name = op.request.name;  // the key is built before op is moved from
    pending.emplace(name, std::move(op));
    return;
  }
  PendingMap::node_type node = std::move(spare_.back());
  spare_.pop_back();
  node.key() = op.request.name;
  // Copied into the released op's strings and vectors (their capacity: no allocation), which
  // op keeps too; what is shared is moved.
  Pending& held = node.mapped();
  held.request = op.request;
  held.input = op.input;
  held.output = op.output;
  held.state = std::move(op.state);
  held.seq = op.seq;
  held.ready = std::move(op.ready);
  held.cached_since = {};
  pending.insert(std::move(node));
}

void ProcessSet::release(PendingMap::iterator op) {
  PendingMap::node_type node = pending.extract(op);
  node.mapped().state.reset();  // the handle's state and the device mark are not kept alive
  node.mapped().ready.reset();
  constexpr size_t kMaxSpare = 4096;
  if (spare_.size() < kMaxSpare) spare_.push_back(std::move(node));
}

}  // namespace kolo::engine
