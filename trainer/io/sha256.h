// SHA-256 (OpenSSL's EVP), for the checksums of checkpoint files.
#pragma once

#include <cstddef>
#include <string>

typedef struct evp_md_ctx_st EVP_MD_CTX;

namespace kolo::trainer {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t bytes);
  std::string hex();  // 64 lowercase hex digits; ends the computation

 private:
  EVP_MD_CTX* ctx_;
};

// SHA-256 of a file's bytes, as 64 lowercase hex digits.
std::string sha256_file(const std::string& path);

}  // namespace kolo::trainer
