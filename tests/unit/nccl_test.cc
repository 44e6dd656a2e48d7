// The host side of comm/nccl, without a device: kolo's dtypes and ops as NCCL's (and the
// refusals), NCCL results as kolo errors, and the unique-id exchange through the store between
// thread ranks (rank 0's id reaches everyone; a wrong-length value, a missing rank 0 and a bad
// rank are clear errors).
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "comm/base/error.h"
#include "comm/bootstrap/store.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/nccl/nccl_map.h"

namespace kolo::nccl {
namespace {

using namespace std::chrono_literals;

TEST(Nccl, DtypesAndOpsMapOrAreRefusedByName) {
  EXPECT_EQ(nccl_dtype(DType::kFloat32), ncclFloat32);
  EXPECT_EQ(nccl_dtype(DType::kFloat64), ncclFloat64);
  EXPECT_EQ(nccl_dtype(DType::kFloat16), ncclFloat16);
  EXPECT_EQ(nccl_dtype(DType::kBFloat16), ncclBfloat16);
  EXPECT_EQ(nccl_dtype(DType::kInt32), ncclInt32);
  EXPECT_EQ(nccl_dtype(DType::kInt64), ncclInt64);
  EXPECT_EQ(nccl_dtype(DType::kUInt8), ncclUint8);
  EXPECT_EQ(nccl_dtype(DType::kInt8), ncclInt8);
  try {
    nccl_dtype(DType::kInt16);
    ADD_FAILURE() << "int16 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("int16"), std::string::npos) << e.what();
  }
  EXPECT_EQ(nccl_op(ReduceOp::kSum, 2), ncclSum);
  EXPECT_EQ(nccl_op(ReduceOp::kAverage, 2), ncclAvg);
  EXPECT_EQ(nccl_op(ReduceOp::kAverage, 1), ncclSum);  // NCCL's one-rank avg drops a tail
  EXPECT_EQ(nccl_op(ReduceOp::kMin, 2), ncclMin);
  EXPECT_EQ(nccl_op(ReduceOp::kMax, 2), ncclMax);
  EXPECT_EQ(nccl_op(ReduceOp::kProduct, 2), ncclProd);
  EXPECT_THROW(nccl_op(static_cast<ReduceOp>(kNumReduceOps), 2), Error);
  EXPECT_THROW(nccl_op(ReduceOp::kBand, 2), Error);  // NCCL has no bitwise ops
}

TEST(Nccl, ResultsBecomeKoloErrors) {
  EXPECT_NO_THROW(check_nccl(ncclSuccess, "x"));
  EXPECT_NO_THROW(check_nccl(ncclInProgress, "x"));
  auto code_of = [](ncclResult_t r) {
    try {
      check_nccl(r, "ncclAllReduce");
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("ncclAllReduce"), std::string::npos) << e.what();
      return e.code();
    }
    return ErrorCode::kInternal;
  };
  EXPECT_EQ(code_of(ncclInvalidArgument), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of(ncclInvalidUsage), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of(ncclRemoteError), ErrorCode::kPeerLost);
  EXPECT_EQ(code_of(ncclSystemError), ErrorCode::kIo);
  EXPECT_EQ(code_of(ncclUnhandledCudaError), ErrorCode::kIo);
}

TEST(Nccl, UniqueIdTravelsThroughTheStore) {
  bootstrap::MemoryStore store;
  const int n = 4;
  std::vector<std::string> got(n);
  std::vector<std::thread> ranks;
  int made = 0;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      got[r] = share_unique_id(
          store, "nccl/world/id", r,
          [&] {
            ++made;
            return std::string(kUniqueIdBytes, 'k');
          },
          5s);
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(made, 1);  // only rank 0 makes one
  for (const std::string& id : got) EXPECT_EQ(id, std::string(kUniqueIdBytes, 'k'));
}

TEST(Nccl, BadIdsMissingRankZeroAndBadRanksAreClearErrors) {
  bootstrap::MemoryStore store;
  store.set("nccl/short", "abc");
  try {
    share_unique_id(
        store, "nccl/short", 1, [] { return std::string(); }, 1s);
    ADD_FAILURE() << "a 3-byte id accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kMismatch);
    EXPECT_NE(std::string(e.what()).find("nccl/short"), std::string::npos) << e.what();
  }
  try {
    share_unique_id(
        store, "nccl/nobody", 2, [] { return std::string(); }, 100ms);
    ADD_FAILURE() << "no timeout without rank 0";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
  }
  // Checked before NCCL or the device is touched.
  EXPECT_THROW(NcclCommunicator(store, "nccl/x", 2, 2, 1s), Error);
  EXPECT_THROW(NcclCommunicator(store, "nccl/x", -1, 2, 1s), Error);
  EXPECT_THROW(NcclCommunicator(store, "nccl/x", 0, 1, 0ms), Error);
}

}  // namespace
}  // namespace kolo::nccl
