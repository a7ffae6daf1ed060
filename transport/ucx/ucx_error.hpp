#pragma once
// Errors of the UCX channel. Every message names the UCX call or the operation, the tag
// and the peer, so a failed or stuck pipeline edge can be found from the message alone.
#include <stdexcept>
#include <string>

namespace conveyor {

/// A UCX call failed ("ucp_ep_create: Destination is unreachable"), or a message did
/// not arrive as expected (wrong length).
class UcxError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An operation did not complete before its deadline; the operation was cancelled (or
/// abandoned, its buffer kept alive by the worker) before this was thrown.
class UcxTimeout : public UcxError {
 public:
  using UcxError::UcxError;
};

}  // namespace conveyor
