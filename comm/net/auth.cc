// Mutual handshake with protocol version and HMAC-SHA256 proofs of the job secret (OpenSSL
// libcrypto), and where the job secret comes from.
#include "comm/net/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "comm/base/env.h"
#include "comm/base/error.h"

namespace kolo::net {
namespace {

constexpr char kChallengeMagic[4] = {'K', 'O', 'L', 'O'};
constexpr char kHelloMagic[4] = {'K', 'O', 'L', 'H'};
constexpr char kProofMagic[4] = {'K', 'O', 'L', 'S'};
constexpr size_t kNonceOffset = 16 + kTagBytes;  // the connector's nonce inside the Hello
constexpr size_t kMacOffset = kHelloBytes - 32;

std::mutex g_secret_mutex;
std::string g_launcher_secret;  // set_job_secret

void put_u32(uint8_t* p, uint32_t v) {
  std::memcpy(p, &v, 4);
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

std::array<uint8_t, 32> hmac(const std::string& secret, const uint8_t* message, size_t bytes) {
  std::array<uint8_t, 32> mac{};
  unsigned int len = 0;
  static const uint8_t kEmpty = 0;
  const void* key = secret.empty() ? static_cast<const void*>(&kEmpty) : secret.data();
  if (HMAC(EVP_sha256(), key, static_cast<int>(secret.size()), message, bytes, mac.data(), &len) ==
      nullptr)
    KOLO_THROW(ErrorCode::kInternal, "HMAC-SHA256 failed");
  return mac;
}

// The connector's MAC: the challenge nonce and the Hello body (everything before the MAC).
std::array<uint8_t, 32> hello_mac(const Challenge& challenge, const uint8_t* body,
                                  const std::string& secret) {
  uint8_t message[32 + kMacOffset];
  std::memcpy(message, challenge.data() + 8, 32);
  std::memcpy(message + 32, body, kMacOffset);
  return hmac(secret, message, sizeof message);
}

// The acceptor's proof: both nonces and the status, under a label of its own.
std::array<uint8_t, 32> reply_proof(Status status, const uint8_t* hello_bytes,
                                    const Challenge& challenge, const std::string& secret) {
  uint8_t message[4 + 32 + 32 + 1];
  std::memcpy(message, kProofMagic, 4);
  std::memcpy(message + 4, hello_bytes + kNonceOffset, 32);
  std::memcpy(message + 36, challenge.data() + 8, 32);
  message[68] = static_cast<uint8_t>(status);
  return hmac(secret, message, sizeof message);
}

void random_bytes(uint8_t* out, size_t bytes) {
  if (RAND_bytes(out, static_cast<int>(bytes)) != 1)
    KOLO_THROW(ErrorCode::kInternal, "RAND_bytes failed");
}

std::string read_secret_file(const std::string& path) {
  // O_NONBLOCK: a FIFO would block open() until some writer came, past every deadline; the
  // regular-file check below refuses it (reads of a regular file do not heed the flag).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    KOLO_THROW(ErrorCode::kInvalidArgument, "KOLO_SECRET_FILE ", path,
               " cannot be opened: ", std::strerror(errno));
  struct stat st {};
  std::string text;
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= 4096;
  if (ok) {
    text.resize(static_cast<size_t>(st.st_size));
    ok = ::read(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  }
  ::close(fd);
  KOLO_CHECK_ARG(ok, "KOLO_SECRET_FILE ", path,
                 " is not a readable regular file of at most 4096 "
                 "bytes");
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  KOLO_CHECK_ARG((st.st_mode & 077) == 0, "KOLO_SECRET_FILE ", path, " has mode ", mode,
                 ": it must be readable by its owner only (chmod 600 ", path, ")");
  // The first line is the secret: a file may go on with comments, and an editor's line end
  // (\n or \r\n) is no part of it.
  text = text.substr(0, text.find('\n'));
  if (!text.empty() && text.back() == '\r') text.pop_back();
  KOLO_CHECK_ARG(!text.empty(), "KOLO_SECRET_FILE ", path, " is empty or its first line is empty");
  return text;
}

}  // namespace

std::string job_secret() {
  if (auto secret = env::get("KOLO_SECRET")) return *secret;
  if (auto path = env::get("KOLO_SECRET_FILE")) return read_secret_file(*path);
  std::lock_guard<std::mutex> lock(g_secret_mutex);
  return g_launcher_secret;
}

void set_job_secret(const std::string& secret) {
  std::lock_guard<std::mutex> lock(g_secret_mutex);
  g_launcher_secret = secret;
}

std::string make_secret() {
  uint8_t bytes[32];
  random_bytes(bytes, sizeof bytes);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : bytes) hex += {kHex[b >> 4], kHex[b & 15]};
  return hex;
}

bool insecure_allowed() {
  return env::get_bool("KOLO_INSECURE", false);
}

bool is_loopback(const std::string& host) {
  return host.rfind("127.", 0) == 0 || host == "localhost";
}

void require_secret_for(const std::string& host, const std::string& what) {
  if (is_loopback(host) || !job_secret().empty()) return;
  KOLO_CHECK_ARG(insecure_allowed(), what, " would be reachable at the non-loopback address ", host,
                 " without a job secret: set KOLO_SECRET (or KOLO_SECRET_FILE, mode 0600) "
                 "to the same value on every rank (kolorun and mpirun make one themselves), or "
                 "set KOLO_INSECURE=1 to run unauthenticated");
}

Challenge make_challenge() {
  Challenge c{};
  std::memcpy(c.data(), kChallengeMagic, 4);
  put_u32(c.data() + 4, kProtocolVersion);
  random_bytes(c.data() + 8, 32);
  return c;
}

HelloBytes make_hello(const Challenge& challenge, const Hello& hello, const std::string& secret) {
  KOLO_CHECK_ARG(hello.tag.size() <= kTagBytes, "handshake tag longer than ", kTagBytes,
                 " bytes: ", hello.tag);
  HelloBytes out{};
  std::memcpy(out.data(), kHelloMagic, 4);
  put_u32(out.data() + 4, kProtocolVersion);
  put_u32(out.data() + 8, static_cast<uint32_t>(hello.role));
  put_u32(out.data() + 12, static_cast<uint32_t>(hello.rank));
  std::memcpy(out.data() + 16, hello.tag.data(), hello.tag.size());
  random_bytes(out.data() + kNonceOffset, 32);
  auto mac = hello_mac(challenge, out.data(), secret);
  std::memcpy(out.data() + kMacOffset, mac.data(), mac.size());
  return out;
}

Hello verify_hello(const uint8_t* bytes, const Challenge& challenge, const std::string& secret) {
  if (std::memcmp(bytes, kHelloMagic, 4) != 0)
    KOLO_THROW(ErrorCode::kAuth, "not a kolo handshake (bad magic)");
  uint32_t version = get_u32(bytes + 4);
  if (version != kProtocolVersion)
    KOLO_THROW(ErrorCode::kAuth, "protocol version ", version, ", expected ", kProtocolVersion);
  auto mac = hello_mac(challenge, bytes, secret);
  if (CRYPTO_memcmp(mac.data(), bytes + kMacOffset, mac.size()) != 0)
    KOLO_THROW(ErrorCode::kAuth,
               "wrong job secret (HMAC mismatch; check KOLO_SECRET / KOLO_SECRET_FILE)");
  Hello hello;
  hello.role = static_cast<Role>(get_u32(bytes + 8));
  hello.rank = static_cast<int>(get_u32(bytes + 12));
  const char* tag = reinterpret_cast<const char*>(bytes + 16);
  hello.tag.assign(tag, strnlen(tag, kTagBytes));
  return hello;
}

Reply make_reply(Status status, const uint8_t* hello_bytes, const Challenge& challenge,
                 const std::string& secret) {
  Reply reply{};
  reply[0] = static_cast<uint8_t>(status);
  // Only an accepted connection carries a proof: one that failed verify_hello may not deserve
  // an oracle for MACs under the secret.
  if (status == Status::kAccepted) {
    auto proof = reply_proof(status, hello_bytes, challenge, secret);
    std::memcpy(reply.data() + 1, proof.data(), proof.size());
  }
  return reply;
}

Status status_of(const Error& e) {
  return std::strstr(e.what(), "protocol version") ? Status::kBadVersion : Status::kBadSecret;
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
  Reply reply{};
  sock.recv_all(reply.data(), reply.size(), deadline);
  switch (static_cast<Status>(reply[0])) {
    case Status::kAccepted: break;
    case Status::kBadVersion:
      KOLO_THROW(ErrorCode::kAuth, sock.peer_name(), " refused the handshake: protocol version");
    case Status::kBadSecret:
      KOLO_THROW(ErrorCode::kAuth, sock.peer_name(),
                 " refused the handshake: wrong job secret (check KOLO_SECRET / KOLO_SECRET_FILE)");
    case Status::kUnexpected:
      throw UnexpectedPeer(
          ErrorCode::kAuth,
          detail::concat(sock.peer_name(), " refused the handshake: it does not expect rank ",
                         hello.rank, " of communicator '", hello.tag, "'"));
    default:
      KOLO_THROW(ErrorCode::kAuth, sock.peer_name(), " answered the handshake with status ",
                 int{reply[0]});
  }
  auto proof = reply_proof(Status::kAccepted, out.data(), challenge, secret);
  if (CRYPTO_memcmp(proof.data(), reply.data() + 1, proof.size()) != 0)
    KOLO_THROW(ErrorCode::kAuth, sock.peer_name(),
               " accepted the handshake but could not prove the job secret: it is not this "
               "job's kolo endpoint (or its KOLO_SECRET differs)");
}

}  // namespace kolo::net
