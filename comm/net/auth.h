// The handshake that opens every kolo TCP connection (rendezvous store and tcp transport).
//
//   acceptor -> connector : Challenge  "KOLO" | version u32 | nonce[32]
//   connector -> acceptor : Hello      "KOLH" | version u32 | role u32 | rank i32 | tag[64] |
//                                      mac[32] = HMAC-SHA256(KOLO_SECRET, nonce | role..tag)
//   acceptor -> connector : one status byte (0 accepted, 1 wrong version, 2 wrong secret)
//
// The nonce makes a recorded Hello useless for another connection. Without KOLO_SECRET the MAC
// uses an empty key, so it still catches garbage; with it, a wrong secret is refused.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "comm/net/socket.h"

namespace kolo::net {

inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr size_t kChallengeBytes = 40;
inline constexpr size_t kHelloBytes = 4 + 4 + 4 + 4 + 64 + 32;
inline constexpr size_t kTagBytes = 64;

enum class Role : uint32_t { kStoreClient = 1, kTransportPeer = 2 };

struct Hello {
  Role role;
  int rank;
  std::string tag;  // which communicator the connection belongs to
};

using Challenge = std::array<uint8_t, kChallengeBytes>;

std::string job_secret();  // KOLO_SECRET, or "" when unset

Challenge make_challenge();
std::array<uint8_t, kHelloBytes> make_hello(const Challenge& challenge, const Hello& hello,
                                            const std::string& secret);
// Checks a received Hello against the challenge; throws kAuth naming what was wrong.
Hello verify_hello(const uint8_t* bytes, const Challenge& challenge, const std::string& secret);

// Blocking forms for callers that handle one connection at a time.
void client_handshake(Socket& sock, const Hello& hello, const std::string& secret,
                      Deadline deadline);
Hello server_handshake(Socket& sock, const std::string& secret, Deadline deadline);

}  // namespace kolo::net
