#pragma once
// Errors of the gradient all-reduce. Every message starts with the group's description
// ("collective: group 'stage 1' (rank 2 of 4): ..."), so the failing group and rank can be
// found from the message alone. After any CollectiveError raised by a bucket the group is
// broken: every later start() throws at once, and the caller rebuilds the group (next
// generation) on every rank.
// Thread-safety: plain values.
#include <stdexcept>
#include <string>

namespace conveyor {

class CollectiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A peer did not arrive (join) or did not take part (a bucket) within the group's timeout.
class CollectiveTimeout : public CollectiveError {
 public:
  using CollectiveError::CollectiveError;
};

}  // namespace conveyor
