// An interrupt hook (what the Python binding installs for Ctrl-C) ends a blocking wait within a
// few of its check intervals instead of at the communicator's timeout, fails the communicator,
// and tells the peer; the enum names answer out-of-range values without reading past their
// tables (kolo.DType(15) from Python read another table's strings, or crashed).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "comm/base/algorithm.h"
#include "comm/base/dtype.h"
#include "comm/base/error.h"
#include "comm/base/interrupt.h"
#include "comm/base/reduce_op.h"
#include "comm/base/transport_kind.h"
#include "tests/unit/thread_ranks.h"

namespace kolo::testing {
namespace {

TEST(Interrupt, NoHookNeverInterrupts) {
  EXPECT_FALSE(interrupt_requested());
}

TEST(Interrupt, AHookThatAsksEndsAnAllreduceAndThePeerHearsIt) {
  for (TransportKind transport : {TransportKind::kShm, TransportKind::kTcp}) {
    CommunicatorOptions options;
    options.timeout = std::chrono::seconds(30);
    auto results = run_thread_ranks(
        2, transport,
        [](Communicator& comm) -> std::string {
          std::vector<float> v(1024, 1.0f);
          if (comm.rank() == 1) {
            // Late, so that rank 0 waits for it and is interrupted while it does.
            std::this_thread::sleep_for(std::chrono::milliseconds(1500));
            try {
              comm.allreduce(v.data(), v.data(), v.size(), DType::kFloat32, ReduceOp::kSum);
              return "rank 1: no error";
            } catch (const Error& e) {
              return e.code() == ErrorCode::kPeerLost ? std::string("lost: ") + e.what()
                                                      : std::string("other: ") + e.what();
            }
          }
          ScopedInterruptHook hook([] { return true; });
          const auto start = std::chrono::steady_clock::now();
          try {
            comm.allreduce(v.data(), v.data(), v.size(), DType::kFloat32, ReduceOp::kSum);
            return "rank 0: no error";
          } catch (const Error& e) {
            const double seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            return seconds < 1.0 ? std::string("interrupted: ") + e.what()
                                 : "rank 0 took " + std::to_string(seconds) + " s";
          }
        },
        options);
    const std::string name = transport_name(transport);
    EXPECT_NE(results[0].find("interrupted: "), std::string::npos) << name << ": " << results[0];
    EXPECT_NE(results[0].find("interrupted by a signal"), std::string::npos) << results[0];
    EXPECT_NE(results[1].find("lost: "), std::string::npos) << name << ": " << results[1];
    EXPECT_NE(results[1].find("rank 0"), std::string::npos) << results[1];
  }
}

TEST(EnumNames, OutOfRangeValuesAreNamedByNumber) {
  EXPECT_EQ(std::string(dtype_name(static_cast<DType>(15))), "dtype 15");
  EXPECT_NE(std::string(op_name(static_cast<ReduceOp>(99))).find("99"), std::string::npos);
  EXPECT_NE(std::string(algorithm_name(static_cast<Algorithm>(50))).find("50"), std::string::npos);
  EXPECT_NE(std::string(transport_name(static_cast<TransportKind>(100))).find("100"),
            std::string::npos);
}

}  // namespace
}  // namespace kolo::testing
