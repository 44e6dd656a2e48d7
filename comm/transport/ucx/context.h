// UCX transport (KOLO_TRANSPORT=ucx): tagged non-blocking point-to-point messages through UCP,
// one worker per communicator, its address exchanged through the store. UCX picks the fabric
// (InfiniBand, RoCE, TCP, shared memory; UCX_TLS limits it, e.g. UCX_TLS=tcp in the test bed).
#pragma once

#include <memory>

#include "comm/transport/context.h"

namespace kolo::transport::ucx {

// The context is declared in context.cc so that this header does not need <ucp/api/ucp.h>.
std::unique_ptr<Context> create(const ContextOptions& options);

}  // namespace kolo::transport::ucx
