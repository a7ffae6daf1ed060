#pragma once
// Proof of holding the job token without sending it: the server sends a fresh nonce, the
// client answers HMAC-SHA256(token, nonce), the server recomputes and compares in
// constant time. (OpenSSL libcrypto does the hashing.)
#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "transport/rendezvous/frame.hpp"

namespace conveyor::rendezvous {

using Mac = std::array<std::uint8_t, kMacBytes>;

/// HMAC-SHA256 of `data` keyed by `key` (any length, empty allowed).
Mac hmac_sha256(std::string_view key, std::span<const std::uint8_t> data);

/// Equal contents, compared in time independent of where they differ. Different sizes
/// are unequal (sizes are not secret).
bool equal_in_constant_time(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b);

/// 32 bytes from std::random_device.
Nonce make_nonce();

}  // namespace conveyor::rendezvous
