// The handshake that opens every kolo TCP connection (rendezvous store and tcp transport). Both
// sides prove that they hold the job secret (mutual authentication):
//
//   acceptor -> connector : Challenge  "KOLO" | version u32 | server nonce[32]
//   connector -> acceptor : Hello      "KOLH" | version u32 | role u32 | rank i32 | tag[64] |
//                                      client nonce[32] | mac[32]
//                           mac   = HMAC-SHA256(secret, server nonce | Hello before the mac)
//   acceptor -> connector : Reply      status u8 | proof[32]
//                           proof = HMAC-SHA256(secret, "KOLS" | client nonce | server nonce |
//                                                status)
//   status: 0 accepted, 1 wrong protocol version, 2 wrong secret, 3 not a connection the
//   acceptor expects (another communicator, role or rank).
//
// Fresh nonces on both sides make a recorded exchange useless for another connection, and the
// acceptor's proof stops a stranger that listens in the job's place from collecting the ranks'
// data. Nothing after the handshake is encrypted or signed (docs/security.md).
//
// The secret (job_secret): KOLO_SECRET, else the file named by KOLO_SECRET_FILE (readable by its
// owner only), else one set by the launcher path (mpirun: rank 0 makes one and broadcasts it).
// Without a secret kolo listens on loopback only; a non-loopback address needs KOLO_INSECURE=1.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "comm/base/error.h"
#include "comm/net/socket.h"

namespace kolo::net {

inline constexpr uint32_t kProtocolVersion = 2;
inline constexpr size_t kChallengeBytes = 40;
inline constexpr size_t kTagBytes = 64;
inline constexpr size_t kHelloBytes = 4 + 4 + 4 + 4 + kTagBytes + 32 + 32;
inline constexpr size_t kReplyBytes = 1 + 32;

enum class Role : uint32_t { kStoreClient = 1, kTransportPeer = 2 };
enum class Status : uint8_t { kAccepted = 0, kBadVersion = 1, kBadSecret = 2, kUnexpected = 3 };

struct Hello {
  Role role;
  int rank;
  std::string tag;  // which communicator the connection belongs to
};

using Challenge = std::array<uint8_t, kChallengeBytes>;
using HelloBytes = std::array<uint8_t, kHelloBytes>;
using Reply = std::array<uint8_t, kReplyBytes>;

// The job secret as described above; "" when there is none. Throws kInvalidArgument when
// KOLO_SECRET_FILE cannot be read, is empty, or is readable by group or others.
std::string job_secret();
// Used when the launcher hands out the secret (mpirun); KOLO_SECRET and KOLO_SECRET_FILE win.
void set_job_secret(const std::string& secret);
std::string make_secret();  // 32 random bytes as 64 hex digits
// KOLO_INSECURE=1: non-loopback addresses without a secret are allowed (with a warning).
bool insecure_allowed();
// Refuses (kInvalidArgument) to listen on or rendezvous at a non-loopback `host` without a job
// secret, unless KOLO_INSECURE=1; `what` names the user of the address in the message.
void require_secret_for(const std::string& host, const std::string& what);
bool is_loopback(const std::string& host);

Challenge make_challenge();
HelloBytes make_hello(const Challenge& challenge, const Hello& hello, const std::string& secret);
// Checks a received Hello against the challenge; throws kAuth naming what was wrong.
Hello verify_hello(const uint8_t* bytes, const Challenge& challenge, const std::string& secret);
// The acceptor's answer to `hello_bytes` (a Hello received for `challenge`).
Reply make_reply(Status status, const uint8_t* hello_bytes, const Challenge& challenge,
                 const std::string& secret);
// The Status a failed verify_hello stands for.
Status status_of(const Error& e);

// kAuth for a handshake the acceptor refused because it does not expect this connection (another
// communicator, role, rank or store generation): the secret itself was right.
struct UnexpectedPeer : Error {
  using Error::Error;
};

// The connector's side, blocking until the deadline; throws kAuth when the acceptor refuses or
// cannot prove the secret (UnexpectedPeer when it does not expect this connection).
void client_handshake(Socket& sock, const Hello& hello, const std::string& secret,
                      Deadline deadline);

}  // namespace kolo::net
