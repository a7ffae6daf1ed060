#pragma once
// The result of a fallible step inside the rendezvous store (decoding a frame, applying a
// request to the state). Call sites read `if (!s.ok()) return s;`. Errors that reach a
// user leave the library as RendezvousError (error.hpp).
#include <string>
#include <utility>

namespace conveyor::rendezvous {

class Status {
 public:
  static Status ok_status() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !failed_; }
  /// Empty when ok().
  const std::string& message() const { return message_; }

 private:
  Status() = default;
  explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}

  bool failed_ = false;
  std::string message_;
};

}  // namespace conveyor::rendezvous
