// The MPI job kolo may be running in: initializing MPI on demand, the world rank and size, and
// a broadcast over MPI_COMM_WORLD (how ranks started by mpirun share rank 0's store address).
// Always compiled; without MPI (KOLO_WITH_MPI off) everything but available() throws.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

namespace kolo::bootstrap::mpi_world {

// True when this kolo was built with MPI.
bool available();

// Initializes MPI (asking for MPI_THREAD_MULTIPLE, accepting MPI_THREAD_SERIALIZED) unless the
// application already did. Only when kolo initialized MPI does it finalize it, at process exit.
void ensure_initialized();

int world_rank();
int world_size();

// Collective over MPI_COMM_WORLD: every process calls it; all return `root`'s value. A rank
// that is not there within `timeout` (root late or stuck before it, or a rank that never came)
// is a kTimeout naming `what` and KOLO_TIMEOUT_SECONDS; the MPI request is then left behind,
// and a later broadcast in this process is refused (kInvalidArgument): it would be matched
// against the abandoned one.
std::string broadcast(const std::string& value, int root, std::chrono::milliseconds timeout,
                      const char* what);

// MPI's text for an MPI error code, e.g. for MPI_ERRORS_RETURN results.
std::string error_string(int code);

// Held around kolo's MPI calls: locks a process-wide mutex when MPI gives less than
// MPI_THREAD_MULTIPLE (two communicators may progress from two threads), empty otherwise.
std::unique_lock<std::mutex> call_lock();

}  // namespace kolo::bootstrap::mpi_world
