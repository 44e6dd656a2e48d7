// Sha256 over OpenSSL's EVP interface, and the hash of a whole file.
#include "trainer/io/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <vector>

#include "comm/base/error.h"

namespace kolo::trainer {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx_);
    KOLO_THROW(ErrorCode::kInternal, "SHA-256: OpenSSL could not start a digest");
  }
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(ctx_);
}

void Sha256::update(const void* data, size_t bytes) {
  if (EVP_DigestUpdate(ctx_, data, bytes) != 1)
    KOLO_THROW(ErrorCode::kInternal, "SHA-256: OpenSSL digest update failed");
}

std::string Sha256::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(ctx_, digest, &length) != 1)
    KOLO_THROW(ErrorCode::kInternal, "SHA-256: OpenSSL digest failed");
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += digits[digest[i] >> 4];
    out += digits[digest[i] & 15];
  }
  return out;
}

std::string sha256_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) KOLO_THROW_ERRNO("open ", path);
  Sha256 sha;
  std::vector<unsigned char> chunk(size_t{4} << 20);
  for (ssize_t got = 0; (got = ::read(fd, chunk.data(), chunk.size())) != 0;) {
    if (got < 0) {
      ::close(fd);
      KOLO_THROW(ErrorCode::kIo, "SHA-256 of ", path, ": read failed");
    }
    sha.update(chunk.data(), static_cast<size_t>(got));
  }
  ::close(fd);
  return sha.hex();
}

}  // namespace kolo::trainer
