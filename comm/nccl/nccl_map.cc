#include "comm/nccl/nccl_map.h"

#include "comm/base/error.h"

namespace kolo::nccl {

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return ncclFloat32;
    case DType::kFloat64: return ncclFloat64;
    case DType::kFloat16: return ncclFloat16;
    case DType::kBFloat16: return ncclBfloat16;
    case DType::kInt32: return ncclInt32;
    case DType::kInt64: return ncclInt64;
    case DType::kUInt8: return ncclUint8;
    case DType::kInt8: return ncclInt8;
    case DType::kInt16: break;
  }
  KOLO_THROW(ErrorCode::kInvalidArgument, "nccl: dtype ", dtype_name(dtype),
             " has no NCCL type (NCCL reduces float32, float64, float16, bfloat16, int32, int64, "
             "uint8 and int8)");
}

ncclRedOp_t nccl_op(ReduceOp op, int size) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    // Over one rank the average is the sum. NCCL's one-rank path for avg (a scaling kernel)
    // leaves the last elements unwritten when the count is not a multiple of its block count
    // in releases before 2.29.7 (NVIDIA/nccl#1950; seen on an H200 with 2^20 + 3 floats).
    case ReduceOp::kAverage: return size == 1 ? ncclSum : ncclAvg;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kProduct: return ncclProd;
    case ReduceOp::kBand:
    case ReduceOp::kBor:
    case ReduceOp::kBxor:
      KOLO_THROW(ErrorCode::kInvalidArgument, "nccl: reduction op ", op_name(op),
                 " is not one NCCL has (sum, avg, min, max, prod): reduce on the CPU");
  }
  KOLO_THROW(ErrorCode::kInvalidArgument, "nccl: reduction op ", static_cast<int>(op),
             " is not one of kolo's");
}

void check_nccl(ncclResult_t result, const char* what, ncclComm_t comm) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  const ErrorCode code = result == ncclInvalidArgument || result == ncclInvalidUsage
                             ? ErrorCode::kInvalidArgument
                         : result == ncclRemoteError ? ErrorCode::kPeerLost
                                                     : ErrorCode::kIo;
  const char* last = comm != nullptr ? ncclGetLastError(comm) : nullptr;
  KOLO_THROW(code, "nccl: ", what, " failed: ", ncclGetErrorString(result),
             (last != nullptr && *last != '\0') ? std::string(" (") + last + ")" : std::string());
}

}  // namespace kolo::nccl
