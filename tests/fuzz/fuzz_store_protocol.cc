// Fuzz target: the rendezvous store's request parser (comm/bootstrap/store_protocol.h), fed
// arbitrary bytes as an authenticated client could send them. Run: scripts/fuzz.sh
// fuzz_store_protocol 60. The first input byte says how the rest arrives: all at once, or in
// reads of 1..255 bytes; both must leave the same state, answers and verdict, every answer
// must be a well-formed response frame, and what stays unparsed must be an incomplete request.
#include <cstdint>
#include <cstring>
#include <string>

#include "comm/bootstrap/store_protocol.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using kolo::bootstrap::StoreState;

struct Run {
  StoreState state;
  std::string in, out, why;
  bool open = true;
};

// Feeds `bytes` in reads of `step` bytes (0: all at once) on connection 7.
Run feed(const std::string& bytes, size_t step) {
  Run run;
  if (step == 0) step = bytes.size() + 1;
  for (size_t at = 0; at < bytes.size() && run.open; at += step) {
    run.in.append(bytes, at, step);
    run.open = kolo::bootstrap::handle_requests(run.state, 7, run.in, run.out, run.why);
  }
  return run;
}

// Every answer: status 0, a length, that many bytes.
void check_responses(const std::string& out) {
  for (size_t at = 0; at < out.size();) {
    FUZZ_CHECK(out.size() - at >= 9 && out[at] == 0);
    uint64_t len;
    std::memcpy(&len, out.data() + at + 1, 8);
    FUZZ_CHECK(len <= out.size() - at - 9);
    at += 9 + len;
  }
}

// What an open connection leaves unparsed is the start of one request.
void check_leftover(const std::string& in) {
  if (in.size() < kolo::bootstrap::kHeaderBytes) return;
  uint32_t key_len;
  uint64_t value_len;
  std::memcpy(&key_len, in.data() + 1, 4);
  std::memcpy(&value_len, in.data() + 5, 8);
  FUZZ_CHECK(in.size() < kolo::bootstrap::kHeaderBytes + key_len + value_len);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Run whole = feed(bytes, 0);
  const Run pieces = feed(bytes, data[0]);
  FUZZ_CHECK(whole.open == pieces.open && whole.why == pieces.why);
  FUZZ_CHECK(whole.out == pieces.out);
  FUZZ_CHECK(whole.state.values == pieces.state.values);
  FUZZ_CHECK(whole.state.waiters == pieces.state.waiters);
  check_responses(whole.out);
  if (whole.open) {
    FUZZ_CHECK(whole.in == pieces.in);
    check_leftover(whole.in);
  }
  return 0;
}
