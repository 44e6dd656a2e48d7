// Handshake with protocol version and HMAC-SHA256 proof of the job secret (OpenSSL libcrypto).
#include "comm/net/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>

#include "comm/base/env.h"
#include "comm/base/error.h"

namespace kolo::net {
namespace {

constexpr char kChallengeMagic[4] = {'K', 'O', 'L', 'O'};
constexpr char kHelloMagic[4] = {'K', 'O', 'L', 'H'};
constexpr size_t kMacOffset = kHelloBytes - 32;

void put_u32(uint8_t* p, uint32_t v) {
  std::memcpy(p, &v, 4);
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// MAC over the challenge nonce and the Hello body (everything before the MAC field).
std::array<uint8_t, 32> compute_mac(const Challenge& challenge, const uint8_t* body,
                                    const std::string& secret) {
  uint8_t message[32 + kMacOffset];
  std::memcpy(message, challenge.data() + 8, 32);
  std::memcpy(message + 32, body, kMacOffset);
  std::array<uint8_t, 32> mac{};
  unsigned int len = 0;
  static const uint8_t kEmpty = 0;
  const void* key = secret.empty() ? static_cast<const void*>(&kEmpty) : secret.data();
  if (HMAC(EVP_sha256(), key, static_cast<int>(secret.size()), message, sizeof message, mac.data(),
           &len) == nullptr)
    KOLO_THROW(ErrorCode::kInternal, "HMAC-SHA256 failed");
  return mac;
}

}  // namespace

std::string job_secret() {
  return env::get_or("KOLO_SECRET", "");
}

Challenge make_challenge() {
  Challenge c{};
  std::memcpy(c.data(), kChallengeMagic, 4);
  put_u32(c.data() + 4, kProtocolVersion);
  if (RAND_bytes(c.data() + 8, 32) != 1) KOLO_THROW(ErrorCode::kInternal, "RAND_bytes failed");
  return c;
}

std::array<uint8_t, kHelloBytes> make_hello(const Challenge& challenge, const Hello& hello,
                                            const std::string& secret) {
  KOLO_CHECK_ARG(hello.tag.size() <= kTagBytes, "handshake tag longer than ", kTagBytes,
                 " bytes: ", hello.tag);
  std::array<uint8_t, kHelloBytes> out{};
  std::memcpy(out.data(), kHelloMagic, 4);
  put_u32(out.data() + 4, kProtocolVersion);
  put_u32(out.data() + 8, static_cast<uint32_t>(hello.role));
  put_u32(out.data() + 12, static_cast<uint32_t>(hello.rank));
  std::memcpy(out.data() + 16, hello.tag.data(), hello.tag.size());
  auto mac = compute_mac(challenge, out.data(), secret);
  std::memcpy(out.data() + kMacOffset, mac.data(), mac.size());
  return out;
}

Hello verify_hello(const uint8_t* bytes, const Challenge& challenge, const std::string& secret) {
  if (std::memcmp(bytes, kHelloMagic, 4) != 0)
    KOLO_THROW(ErrorCode::kAuth, "not a kolo handshake (bad magic)");
  uint32_t version = get_u32(bytes + 4);
  if (version != kProtocolVersion)
    KOLO_THROW(ErrorCode::kAuth, "protocol version ", version, ", expected ", kProtocolVersion);
  auto mac = compute_mac(challenge, bytes, secret);
  if (CRYPTO_memcmp(mac.data(), bytes + kMacOffset, mac.size()) != 0)
    KOLO_THROW(ErrorCode::kAuth, "wrong job secret (HMAC mismatch; check KOLO_SECRET)");
  Hello hello;
  hello.role = static_cast<Role>(get_u32(bytes + 8));
  hello.rank = static_cast<int>(get_u32(bytes + 12));
  const char* tag = reinterpret_cast<const char*>(bytes + 16);
  hello.tag.assign(tag, strnlen(tag, kTagBytes));
  return hello;
}

void client_handshake(Socket& sock, const Hello& hello, const std::string& secret,
                      Deadline deadline) {
  Challenge challenge{};
  sock.recv_all(challenge.data(), challenge.size(), deadline);
  if (std::memcmp(challenge.data(), kChallengeMagic, 4) != 0)
    KOLO_THROW(ErrorCode::kAuth, sock.peer_name(), " is not a kolo endpoint (bad magic)");
  uint32_t version = get_u32(challenge.data() + 4);
  if (version != kProtocolVersion)
    KOLO_THROW(ErrorCode::kAuth, sock.peer_name(), " speaks protocol version ", version,
               ", this kolo speaks ", kProtocolVersion);
  auto out = make_hello(challenge, hello, secret);
  sock.send_all(out.data(), out.size(), deadline);
  uint8_t status = 0xff;
  sock.recv_all(&status, 1, deadline);
  if (status == 1)
    KOLO_THROW(ErrorCode::kAuth, sock.peer_name(), " refused the handshake: protocol version");
  if (status != 0)
    KOLO_THROW(ErrorCode::kAuth, sock.peer_name(),
               " refused the handshake: wrong job secret (check KOLO_SECRET)");
}

Hello server_handshake(Socket& sock, const std::string& secret, Deadline deadline) {
  Challenge challenge = make_challenge();
  sock.send_all(challenge.data(), challenge.size(), deadline);
  uint8_t bytes[kHelloBytes];
  sock.recv_all(bytes, sizeof bytes, deadline);
  try {
    Hello hello = verify_hello(bytes, challenge, secret);
    uint8_t ok = 0;
    sock.send_all(&ok, 1, deadline);
    return hello;
  } catch (const Error& e) {
    uint8_t status = std::strstr(e.what(), "version") ? 1 : 2;
    try {
      sock.send_all(&status, 1, deadline);
    } catch (const Error&) {
    }
    throw;
  }
}

}  // namespace kolo::net
