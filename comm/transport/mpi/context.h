// MPI transport: point-to-point messages over a private MPI communicator that holds exactly the
// members of the kolo communicator. For jobs started by mpirun, where MPI may use fabrics
// (InfiniBand, shared memory with single-copy) that the tcp transport cannot.
#pragma once

#include <memory>

#include "comm/transport/context.h"

namespace kolo::transport::mpi {

// Needs every member to be a distinct process of one MPI job (one MPI_COMM_WORLD); MPI is
// initialized on first use. The context is declared in context.cc so that this installed
// header does not need <mpi.h>.
std::unique_ptr<Context> create(const ContextOptions& options);

}  // namespace kolo::transport::mpi
