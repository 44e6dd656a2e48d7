// Fuzz target: the engine's negotiation messages (fusion/request.h), decoded from arbitrary
// bytes as they arrive from the other ranks. Run: scripts/fuzz.sh fuzz_engine_wire 60.
// Input byte 0 picks requests (even) or responses (odd). Bytes that decode are used as the
// coordinator uses them (signature() names each op) and must survive a round trip: encoding
// what was decoded and decoding it again gives the same encoding.
#include <cstdint>
#include <string>
#include <vector>

#include "comm/base/error.h"
#include "fusion/request.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

namespace engine = kolo::engine;

void requests(const std::string& bytes) {
  bool joined = false;
  std::vector<engine::Request> decoded;
  try {
    decoded = engine::decode_requests(bytes, &joined);
  } catch (const kolo::Error&) {
    return;  // malformed: refused
  }
  for (const engine::Request& r : decoded) (void)r.signature();
  const std::string encoded = engine::encode_requests(decoded, joined);
  bool joined_again = !joined;
  const std::vector<engine::Request> again = engine::decode_requests(encoded, &joined_again);
  FUZZ_CHECK(joined_again == joined);
  FUZZ_CHECK(engine::encode_requests(again, joined_again) == encoded);
}

void responses(const std::string& bytes) {
  std::vector<engine::Response> decoded;
  try {
    decoded = engine::decode_responses(bytes);
  } catch (const kolo::Error&) {
    return;
  }
  for (const engine::Response& r : decoded) (void)r.params.signature();
  const std::string encoded = engine::encode_responses(decoded);
  FUZZ_CHECK(engine::encode_responses(engine::decode_responses(encoded)) == encoded);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0)
    requests(bytes);
  else
    responses(bytes);
  return 0;
}
