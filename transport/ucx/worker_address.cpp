#include "transport/ucx/worker_address.hpp"

#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "transport/ucx/ucx_error.hpp"

namespace conveyor {
namespace {

constexpr std::array<char, 4> kMagic{'C', 'V', 'U', 'A'};
constexpr std::size_t kDigestBytes = 32;
constexpr std::size_t kHeaderBytes = kMagic.size() + 4 + kDigestBytes;
// Real addresses are a few hundred bytes; anything near this is not one.
constexpr std::size_t kMaxAddressBytes = 1 << 20;

std::array<unsigned char, kDigestBytes> sha256(std::span<const std::byte> bytes) {
  std::array<unsigned char, kDigestBytes> digest{};
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1 ||
      length != kDigestBytes)
    throw UcxError("ucx: SHA-256 of a worker address failed (OpenSSL)");
  return digest;
}

}  // namespace

std::vector<std::byte> seal_worker_address(std::span<const std::byte> raw) {
  if (raw.empty() || raw.size() > kMaxAddressBytes)
    throw UcxError("ucx: a worker address of " + std::to_string(raw.size()) + " bytes cannot be sealed");
  std::vector<std::byte> out(kHeaderBytes + raw.size());
  std::memcpy(out.data(), kMagic.data(), kMagic.size());
  const auto n = static_cast<std::uint32_t>(raw.size());
  for (int i = 0; i < 4; ++i) out[kMagic.size() + i] = static_cast<std::byte>(n >> (8 * i));
  const auto digest = sha256(raw);
  std::memcpy(out.data() + kMagic.size() + 4, digest.data(), kDigestBytes);
  std::memcpy(out.data() + kHeaderBytes, raw.data(), raw.size());
  return out;
}

std::span<const std::byte> open_worker_address(std::span<const std::byte> sealed,
                                               const std::string& peer) {
  const std::string where = "ucx: the worker address published by " + peer;
  if (sealed.empty()) throw UcxError(where + " is empty");
  if (sealed.size() < kHeaderBytes || std::memcmp(sealed.data(), kMagic.data(), kMagic.size()) != 0)
    throw UcxError(where + " is not a conveyor worker address (" + std::to_string(sealed.size()) +
                   " bytes; another program or version on the rendezvous?)");
  std::uint32_t n = 0;
  for (int i = 0; i < 4; ++i)
    n |= static_cast<std::uint32_t>(sealed[kMagic.size() + i]) << (8 * i);
  if (n == 0 || n > kMaxAddressBytes || sealed.size() - kHeaderBytes != n)
    throw UcxError(where + " says " + std::to_string(n) + " bytes but holds " +
                   std::to_string(sealed.size() - kHeaderBytes) + " (truncated or corrupt)");
  const std::span<const std::byte> raw = sealed.subspan(kHeaderBytes);
  const auto digest = sha256(raw);
  if (std::memcmp(digest.data(), sealed.data() + kMagic.size() + 4, kDigestBytes) != 0)
    throw UcxError(where + " fails its SHA-256 check (corrupt)");
  return raw;
}

}  // namespace conveyor
