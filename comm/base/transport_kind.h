// The point-to-point transports under a Communicator, their names and parser (KOLO_TRANSPORT).
#pragma once

#include <cstdint>
#include <string_view>

namespace kolo {

// kAuto: shm when every rank is on one host, otherwise mpi when kolo was started by MPI,
// otherwise tcp. kUcx: UCX's tagged messages (chosen with KOLO_TRANSPORT=ucx).
enum class TransportKind : uint8_t { kAuto, kShm, kTcp, kMpi, kUcx };

const char* transport_name(TransportKind kind);
TransportKind parse_transport(std::string_view text, std::string_view setting);

}  // namespace kolo
