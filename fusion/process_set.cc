// ProcessSet: construction (the coordinator lives on the set's rank 0) and removal of a
// finished op.
#include "fusion/process_set.h"

#include <algorithm>

namespace kolo::engine {

ProcessSet::ProcessSet(int id_, std::shared_ptr<Communicator> comm_, const EngineOptions& options)
    : id(id_), comm(std::move(comm_)), cache(options.cache_capacity) {
  // The engine's thread shares its cores with the application's compute: it sleeps while it
  // waits for peers instead of spinning.
  comm->set_busy_polling(false);
  if (comm->rank() == 0)
    coordinator = std::make_unique<Coordinator>(comm->size(), options.stall_check_seconds,
                                                options.stall_shutdown_seconds);
}

void ProcessSet::remove(const std::string& name) {
  pending.erase(name);
  std::erase(order, name);
}

}  // namespace kolo::engine
