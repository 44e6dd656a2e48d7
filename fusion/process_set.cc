// ProcessSet: construction (the coordinator lives on the set's rank 0).
#include "fusion/process_set.h"

namespace kolo::engine {

ProcessSet::ProcessSet(int id_, std::shared_ptr<Communicator> comm_, const EngineOptions& options)
    : id(id_), comm(std::move(comm_)), cache(options.cache_capacity) {
  // Set per iteration (Engine::Impl::iterate): the loop thread, which shares its cores with the
  // application's compute, sleeps while it waits for peers; a thread waiting for a handle,
  // which has nothing else to do, may spin first.
  comm->set_busy_polling(false);
  if (comm->rank() == 0)
    coordinator = std::make_unique<Coordinator>(comm->size(), options.stall_check_seconds,
                                                options.stall_shutdown_seconds);
}

}  // namespace kolo::engine
