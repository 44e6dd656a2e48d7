// Element types, reduction operations and algorithm / transport names shared by every layer,
// with their parsers (used for environment variables and command-line flags).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kolo {

enum class DType : uint8_t { kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8 };
inline constexpr int kNumDTypes = 7;

enum class ReduceOp : uint8_t { kSum, kAverage, kMin, kMax, kProduct };
inline constexpr int kNumReduceOps = 5;

// Collective algorithm. kAuto lets kolo choose; the others force one. kLowLatency and kDirect
// are shared-memory algorithms (shm transport only): small allreduces through flags and slots,
// and single-copy reads of the peers' buffers.
enum class Algorithm : uint8_t {
  kAuto,
  kRing,
  kTree,
  kHalvingDoubling,
  kHierarchical,
  kMpi,
  kGloo,
  kLowLatency,
  kDirect,
};

// Point-to-point transport under a Communicator. kAuto: shm when every rank is on one host,
// otherwise mpi when kolo was started by MPI, otherwise tcp.
enum class TransportKind : uint8_t { kAuto, kShm, kTcp, kMpi };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // "float32", "float16", ...
const char* op_name(ReduceOp op);     // "sum", "avg", ...
const char* algorithm_name(Algorithm algorithm);
const char* transport_name(TransportKind kind);

// Parsers accept the names above (and common aliases: fp32, half, bf16, mean, prod ...).
// `setting` names where the text came from, for the error message.
DType parse_dtype(std::string_view text, std::string_view setting);
ReduceOp parse_op(std::string_view text, std::string_view setting);
Algorithm parse_algorithm(std::string_view text, std::string_view setting);
TransportKind parse_transport(std::string_view text, std::string_view setting);

}  // namespace kolo
