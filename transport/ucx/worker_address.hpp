#pragma once
// A UCX worker address as published to peers, sealed so that what a peer connects to is
// exactly what a conveyor worker published. UCX trusts the bytes given to ucp_ep_create:
// a truncated or foreign address aborts the process inside UCX (an assertion, exit 134)
// rather than returning an error. Sealed form, little-endian:
//   "CVUA" | u32 address length | 32-byte SHA-256 of the address | the address
// Opening checks all four and names the peer in the error.
#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace conveyor {

/// `raw` (ucp_worker_get_address's bytes) in sealed form.
std::vector<std::byte> seal_worker_address(std::span<const std::byte> raw);

/// The address inside `sealed`, a view into it. THROWS UcxError naming `peer` when the
/// bytes are empty, not sealed, of another length than they say, or fail the digest.
std::span<const std::byte> open_worker_address(std::span<const std::byte> sealed,
                                               const std::string& peer);

}  // namespace conveyor
