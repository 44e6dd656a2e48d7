// Fuzz target: net::verify_hello (comm/net/auth.h), the acceptor's check of a connector's
// Hello, under a fixed challenge and secret. Run: scripts/fuzz.sh fuzz_handshake 60.
// Input byte 0 picks the mode:
//   even: the rest, cut or zero-padded to kHelloBytes, is the Hello: refused with kolo::Error
//         kAuth unless it carries the right MAC (seeds/fuzz_handshake/valid_hello does);
//   odd:  a valid Hello from make_hello (role, rank and tag taken from the input), then bytes
//         of the input XORed in at the positions they name: accepted, with the same role, rank
//         and tag, exactly when no byte changed.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "comm/base/error.h"
#include "comm/net/auth.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

namespace net = kolo::net;

const std::string kSecret = "fuzz-secret";

// make_challenge's header with a fixed nonce, so that a crash reproduces.
const net::Challenge& challenge() {
  static const net::Challenge c = [] {
    net::Challenge out = net::make_challenge();
    std::fill(out.begin() + 8, out.end(), uint8_t{0x5a});
    return out;
  }();
  return c;
}

void verify_bytes(const uint8_t* data, size_t size) {
  uint8_t hello[net::kHelloBytes] = {};
  std::memcpy(hello, data, std::min(size, sizeof hello));
  try {
    const net::Hello got = net::verify_hello(hello, challenge(), kSecret);
    FUZZ_CHECK(got.tag.size() <= net::kTagBytes);
  } catch (const kolo::Error& e) {
    FUZZ_CHECK(e.code() == kolo::ErrorCode::kAuth);
  }
}

void verify_mutated(const uint8_t* data, size_t size) {
  if (size < 9) return;
  uint32_t role, rank;
  std::memcpy(&role, data, 4);
  std::memcpy(&rank, data + 4, 4);
  const size_t tag_len = std::min<size_t>(data[8], size - 9);
  const net::Hello sent{static_cast<net::Role>(role), static_cast<int>(rank),
                        std::string(reinterpret_cast<const char*>(data) + 9, tag_len)};
  net::HelloBytes hello;
  try {
    hello = net::make_hello(challenge(), sent, kSecret);
  } catch (const kolo::Error& e) {  // a tag over kTagBytes
    FUZZ_CHECK(e.code() == kolo::ErrorCode::kInvalidArgument && sent.tag.size() > net::kTagBytes);
    return;
  }
  // (position, xor) pairs after the tag.
  const net::HelloBytes valid = hello;
  for (size_t at = 9 + tag_len; at + 1 < size; at += 2)
    hello[data[at] % hello.size()] ^= data[at + 1];
  try {
    const net::Hello got = net::verify_hello(hello.data(), challenge(), kSecret);
    // Every byte of a Hello is under the MAC.
    FUZZ_CHECK(hello == valid);
    FUZZ_CHECK(got.role == sent.role && got.rank == sent.rank);
    // The tag travels NUL-padded: it reads back up to its first NUL.
    FUZZ_CHECK(got.tag == sent.tag.substr(0, sent.tag.find('\0')));
  } catch (const kolo::Error& e) {
    FUZZ_CHECK(e.code() == kolo::ErrorCode::kAuth && hello != valid);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0)
    verify_bytes(data + 1, size - 1);
  else
    verify_mutated(data + 1, size - 1);
  return 0;
}
