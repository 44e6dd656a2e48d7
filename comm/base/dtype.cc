// Names and parsers for DType, ReduceOp, Algorithm and TransportKind.
#include "comm/base/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

#include "comm/base/error.h"

namespace kolo {
namespace {

template <typename E, size_t N>
E parse_name(std::string_view text, std::string_view setting, const char* what,
             const std::array<std::pair<const char*, E>, N>& table) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  std::string accepted;
  for (const auto& [name, value] : table) {
    if (lower == name) return value;
    accepted += accepted.empty() ? name : std::string(", ") + name;
  }
  KOLO_THROW(ErrorCode::kInvalidArgument, setting, "='", text, "' is not a valid ", what,
             "; accepted: ", accepted);
}

}  // namespace

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kInt32: return 4;
    case DType::kFloat64:
    case DType::kInt64: return 8;
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kUInt8: return 1;
  }
  KOLO_THROW(ErrorCode::kInvalidArgument, "unknown dtype ", static_cast<int>(dtype));
}

const char* dtype_name(DType dtype) {
  static const char* const kNames[] = {"float32", "float64", "float16", "bfloat16",
                                       "int32",   "int64",   "uint8"};
  return kNames[static_cast<int>(dtype)];
}

const char* op_name(ReduceOp op) {
  static const char* const kNames[] = {"sum", "avg", "min", "max", "prod"};
  return kNames[static_cast<int>(op)];
}

const char* algorithm_name(Algorithm algorithm) {
  static const char* const kNames[] = {"auto",         "ring", "tree", "halving_doubling",
                                       "hierarchical", "mpi",  "gloo", "low_latency",
                                       "direct"};
  return kNames[static_cast<int>(algorithm)];
}

const char* transport_name(TransportKind kind) {
  static const char* const kNames[] = {"auto", "shm", "tcp", "mpi"};
  return kNames[static_cast<int>(kind)];
}

DType parse_dtype(std::string_view text, std::string_view setting) {
  static const std::array<std::pair<const char*, DType>, 14> kTable{{{"float32", DType::kFloat32},
                                                                     {"fp32", DType::kFloat32},
                                                                     {"float", DType::kFloat32},
                                                                     {"float64", DType::kFloat64},
                                                                     {"fp64", DType::kFloat64},
                                                                     {"double", DType::kFloat64},
                                                                     {"float16", DType::kFloat16},
                                                                     {"fp16", DType::kFloat16},
                                                                     {"half", DType::kFloat16},
                                                                     {"bfloat16", DType::kBFloat16},
                                                                     {"bf16", DType::kBFloat16},
                                                                     {"int32", DType::kInt32},
                                                                     {"int64", DType::kInt64},
                                                                     {"uint8", DType::kUInt8}}};
  return parse_name(text, setting, "dtype", kTable);
}

ReduceOp parse_op(std::string_view text, std::string_view setting) {
  static const std::array<std::pair<const char*, ReduceOp>, 8> kTable{
      {{"sum", ReduceOp::kSum},
       {"avg", ReduceOp::kAverage},
       {"average", ReduceOp::kAverage},
       {"mean", ReduceOp::kAverage},
       {"min", ReduceOp::kMin},
       {"max", ReduceOp::kMax},
       {"prod", ReduceOp::kProduct},
       {"product", ReduceOp::kProduct}}};
  return parse_name(text, setting, "reduce op", kTable);
}

Algorithm parse_algorithm(std::string_view text, std::string_view setting) {
  static const std::array<std::pair<const char*, Algorithm>, 9> kTable{
      {{"auto", Algorithm::kAuto},
       {"ring", Algorithm::kRing},
       {"tree", Algorithm::kTree},
       {"halving_doubling", Algorithm::kHalvingDoubling},
       {"hierarchical", Algorithm::kHierarchical},
       {"mpi", Algorithm::kMpi},
       {"gloo", Algorithm::kGloo},
       {"low_latency", Algorithm::kLowLatency},
       {"direct", Algorithm::kDirect}}};
  return parse_name(text, setting, "algorithm", kTable);
}

TransportKind parse_transport(std::string_view text, std::string_view setting) {
  static const std::array<std::pair<const char*, TransportKind>, 4> kTable{
      {{"auto", TransportKind::kAuto},
       {"shm", TransportKind::kShm},
       {"tcp", TransportKind::kTcp},
       {"mpi", TransportKind::kMpi}}};
  return parse_name(text, setting, "transport", kTable);
}

}  // namespace kolo
