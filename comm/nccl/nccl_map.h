// Internal to comm/nccl: kolo's dtypes and reduction ops as NCCL's, and NCCL results as
// kolo::Error. Host code only: nothing here touches a device.
#pragma once

#include <nccl.h>

#include "comm/base/dtype.h"
#include "comm/base/reduce_op.h"

namespace kolo::nccl {

// NCCL's type for `dtype`; int16 (which NCCL lacks) throws kInvalidArgument naming it.
ncclDataType_t nccl_dtype(DType dtype);
// NCCL's op for `op` over `size` ranks (kAverage is ncclAvg, or ncclSum over one rank:
// NCCL before 2.29.7 leaves the tail of a one-rank avg unwritten, NVIDIA/nccl#1950).
ncclRedOp_t nccl_op(ReduceOp op, int size);
// Throws kolo::Error for anything but ncclSuccess / ncclInProgress: kInvalidArgument for
// NCCL's argument errors, kPeerLost for remote errors, kIo otherwise, with NCCL's message and
// (comm not null) its last error text.
void check_nccl(ncclResult_t result, const char* what, ncclComm_t comm = nullptr);

}  // namespace kolo::nccl
