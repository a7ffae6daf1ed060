#include "actors/checkpoint/sha256.hpp"

#include <openssl/evp.h>

#include <stdexcept>
#include <vector>

namespace conveyor::checkpoint {

struct Sha256::Ctx {
  EVP_MD_CTX* md = nullptr;
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  if (!ctx_->md || EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("sha256: OpenSSL could not initialise a SHA-256 context");
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_->md); }

void Sha256::update(const void* data, std::size_t bytes) {
  if (EVP_DigestUpdate(ctx_->md, data, bytes) != 1)
    throw std::runtime_error("sha256: OpenSSL digest update failed");
}

std::string Sha256::hex_digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx_->md, digest, &len) != 1)
    throw std::runtime_error("sha256: OpenSSL digest final failed");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

FileDigest sha256_of_file(Filesystem& fs, const std::string& path) { return sha256_of_file(*fs.open(path)); }

FileDigest sha256_of_file(ReadableFile& file) {
  FileDigest out;
  Sha256 sha;
  std::vector<char> buffer(4 << 20);
  for (;;) {
    const std::size_t n = file.read_at(buffer.data(), buffer.size(), out.bytes);
    if (n == 0) break;
    sha.update(buffer.data(), n);
    out.bytes += n;
  }
  out.sha256 = sha.hex_digest();
  return out;
}

}  // namespace conveyor::checkpoint
