// The rendezvous store's requests as the server sees them, free of sockets: bytes in, answers
// out, so the parser can be unit-tested and fuzzed (tests/fuzz/fuzz_store_protocol.cc).
// TcpStoreServer (tcp_store.cc) feeds it what each authenticated connection sends.
//
// Little endian, after the handshake (comm/net/auth.h):
//   request  : cmd u8 (1 set, 2 get, 3 add, 4 check) | key_len u32 | value_len u64 | key | value
//   response : status u8 (0) | value_len u64 | value
// add carries the delta as an i64 and is answered with the new value as an i64; a get of a
// missing key is answered later, when some connection sets it (StoreState::waiters); check is
// answered at once: "1" and the value when the key exists, "0" when it does not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kolo::bootstrap {

inline constexpr uint8_t kSet = 1, kGet = 2, kAdd = 3, kCheck = 4;
inline constexpr size_t kHeaderBytes = 1 + 4 + 8;
inline constexpr uint32_t kMaxKey = 4096;
inline constexpr uint64_t kMaxValue = 64ull << 20;
// Replies queued for one connection beyond which its requests wait.
inline constexpr size_t kMaxQueuedReply = 2 * kMaxValue;

// What the server keeps between requests.
struct StoreState {
  std::map<std::string, std::string> values;
  std::map<std::string, std::vector<int>> waiters;  // key -> connections blocked in get()
};

// The response frame that carries `value`.
std::string encode_response(const std::string& value);

// Consumes every complete request at the front of `in`, sent by connection `conn`: applies it
// to `state` and appends its response to `out`, or, for a get of a missing key, adds `conn` to
// the key's waiters. It stops early, leaving requests in `in`, while `out` holds
// kMaxQueuedReply bytes or more. A partial request stays in `in` for the next call. Returns false,
// with `why` saying what was wrong, when the connection must be closed: an unknown command, a key
// or value over kMaxKey / kMaxValue, an add whose value is not 8 bytes or whose key does not hold
// an integer (or that overflows). Requests before the bad one have been applied.
bool handle_requests(StoreState& state, int conn, std::string& in, std::string& out,
                     std::string& why);

}  // namespace kolo::bootstrap
