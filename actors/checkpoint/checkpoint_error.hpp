#pragma once
// The one error type of the checkpoint library. Every failure names the file (or folder)
// it concerns and the reason, so a log line alone tells an operator what to look at.
#include <stdexcept>
#include <string>

namespace conveyor::checkpoint {

class CheckpointError : public std::runtime_error {
 public:
  CheckpointError(std::string path, std::string reason)
      : std::runtime_error(path + ": " + reason), path_(std::move(path)), reason_(std::move(reason)) {}

  /// The file or folder concerned.
  const std::string& path() const { return path_; }
  /// Why, without the path.
  const std::string& reason() const { return reason_; }

 private:
  std::string path_;
  std::string reason_;
};

}  // namespace conveyor::checkpoint
