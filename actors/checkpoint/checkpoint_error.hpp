#pragma once
// The one error type of the checkpoint library. Every failure names the file (or folder)
// it concerns and the reason, so a log line alone tells an operator what to look at.
#include <optional>
#include <stdexcept>
#include <string>

namespace conveyor::checkpoint {

class CheckpointError : public std::runtime_error {
 public:
  /// `lost_node`: the failure is a shard whose writing process was lost (node N), not the
  /// disk or the data: a run that recovers from that loss has not failed for it.
  CheckpointError(std::string path, std::string reason, std::optional<int> lost_node = std::nullopt)
      : std::runtime_error(path + ": " + reason),
        path_(std::move(path)),
        reason_(std::move(reason)),
        lost_node_(lost_node) {}

  /// The file or folder concerned.
  const std::string& path() const { return path_; }
  /// Why, without the path.
  const std::string& reason() const { return reason_; }
  /// The node whose loss took this write down, if that is why it failed.
  std::optional<int> lost_node() const { return lost_node_; }

 private:
  std::string path_;
  std::string reason_;
  std::optional<int> lost_node_;
};

}  // namespace conveyor::checkpoint
