// Inputs that the fuzz targets (tests/fuzz/, scripts/fuzz.sh) found to break a parser of the
// comm and fusion layers, kept as tests once fixed. The trainer's are in
// tests/trainer/fuzz_regressions_test.cc.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fusion/request.h"
#include "tests/unit/expect_error.h"

namespace kolo::engine {
namespace {

using kolo::testing::error_of;

std::string one_request() {
  Request r;
  r.name = "t";
  r.shape = {4};
  return encode_requests({r}, false);
}

// fuzz_engine_wire: a list length of 2^32 - 1 was allocated before any item was read (out of
// memory, or std::bad_alloc out of the engine's loop).
TEST(FuzzRegressions, WireCountBeyondTheBufferIsRefused) {
  std::string bytes = one_request();
  const uint32_t huge = 0xFFFFFFFFu;
  std::memcpy(bytes.data() + 1, &huge, 4);  // the request count, after the joined byte
  bool joined = false;
  error_of([&] { decode_requests(bytes, &joined); }, ErrorCode::kInternal);
  // The shape's length: after the count, the name ("t") and the op type and dtype bytes.
  bytes = one_request();
  std::memcpy(bytes.data() + 1 + 4 + 4 + 1 + 2, &huge, 4);
  error_of([&] { decode_requests(bytes, &joined); }, ErrorCode::kInternal);
  std::string responses = encode_responses({Response{}});
  std::memcpy(responses.data(), &huge, 4);
  error_of([&] { decode_responses(responses); }, ErrorCode::kInternal);
  // Lists that fit still decode.
  EXPECT_EQ(decode_requests(one_request(), &joined)[0].shape, std::vector<int64_t>{4});
}

// fuzz_engine_wire: an enum value past its last name was accepted, and signature() then read
// past the table of names (dtype_name(200)).
TEST(FuzzRegressions, WireEnumOutOfRangeIsRefused) {
  bool joined = false;
  for (size_t field = 0; field < 2; ++field) {  // the op type, then the dtype
    std::string bytes = one_request();
    bytes[1 + 4 + 4 + 1 + field] = static_cast<char>(200);
    error_of([&] { decode_requests(bytes, &joined); }, ErrorCode::kInternal);
  }
  Response error;
  error.kind = Response::Kind::kError;
  std::string bytes = encode_responses({error});
  EXPECT_EQ(decode_responses(bytes)[0].kind, Response::Kind::kError);
  bytes[4] = 2;  // the kind, after the count
  error_of([&] { decode_responses(bytes); }, ErrorCode::kInternal);
}

}  // namespace
}  // namespace kolo::engine
