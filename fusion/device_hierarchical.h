// A process set's device context across hosts (EngineOptions::device_hierarchical, as
// Horovod's hierarchical allreduce): an allreduce is reduced onto each host's first rank by the
// device backend's communicator over the host's ranks (NCCL inside the host), reduced between
// hosts by kolo's own communicator over the hosts' first ranks on host memory, and broadcast
// back inside each host. The other ops run on a device context over the whole set; since that
// context has a stream of its own, both are synchronized around them.
#pragma once

#include <memory>

#include "fusion/device.h"

namespace kolo::engine {

// Collective over `comm` (every member calls it at the same response).
std::unique_ptr<DeviceSet> open_hierarchical(DeviceBackend& backend, Communicator& comm,
                                             int device);

}  // namespace kolo::engine
