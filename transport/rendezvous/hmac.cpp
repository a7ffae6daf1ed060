#include "transport/rendezvous/hmac.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <random>
#include <stdexcept>

namespace conveyor::rendezvous {

Mac hmac_sha256(std::string_view key, std::span<const std::uint8_t> data) {
  static const std::uint8_t kEmpty = 0;  // OpenSSL wants a non-null pointer
  Mac mac{};
  unsigned int length = 0;
  const void* key_ptr = key.empty() ? static_cast<const void*>(&kEmpty) : key.data();
  const unsigned char* data_ptr = data.empty() ? &kEmpty : data.data();
  if (HMAC(EVP_sha256(), key_ptr, static_cast<int>(key.size()), data_ptr, data.size(),
           mac.data(), &length) == nullptr ||
      length != mac.size())
    throw std::runtime_error("rendezvous: HMAC-SHA256 failed in OpenSSL");
  return mac;
}

bool equal_in_constant_time(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Nonce make_nonce() {
  std::random_device device;
  Nonce nonce{};
  for (std::size_t i = 0; i < nonce.size(); i += 4) {
    const std::uint32_t word = device();
    for (std::size_t j = 0; j < 4; ++j) nonce[i + j] = static_cast<std::uint8_t>(word >> (8 * j));
  }
  return nonce;
}

}  // namespace conveyor::rendezvous
