#pragma once
// Checkpoints written on a thread of their own, so the step loop does not wait for the
// disk. submit() queues a snapshot and returns; a bounded queue (`capacity` snapshots,
// each a full host copy of the model and optimizer state) caps the memory: when it is
// full, submit() waits for the oldest write to finish, and says so in the log.
//
// Errors are never lost: a failed write is kept and thrown (CheckpointError naming the
// file, the reason and the step) from the next submit() or flush(), once; later writes
// still run. The destructor flushes and logs any error it cannot throw.
// Thread-safety: submit()/flush() may be called from any one thread at a time.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/checkpoint/checkpoint_writer.hpp"
#include "actors/checkpoint/verified_checkpoints.hpp"
#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/snapshot.hpp"

namespace conveyor::checkpoint {

/// A write that failed, as take_errors() hands it over.
struct FailedWrite {
  std::int64_t step = 0;
  std::string message;           // "step N: " and the CheckpointError's text
  std::optional<int> lost_node;  // CheckpointError::lost_node: lost with that node
};

struct BackgroundWriterOptions {
  std::string checkpoint_dir;
  int keep = 3;
  std::size_t capacity = 1;  // snapshots queued beyond the one being written
};

class BackgroundWriter {
 public:
  /// `fs` must outlive the writer.
  BackgroundWriter(Filesystem& fs, BackgroundWriterOptions options);
  ~BackgroundWriter();
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  /// Queues `snapshot` and returns without waiting for the disk (unless the queue is
  /// full). First throws the errors of earlier writes, if any (the snapshot is then not
  /// queued: call again to queue it).
  void submit(Snapshot snapshot);

  /// Waits until every queued snapshot is written, then throws the errors of writes that
  /// failed since the last submit()/flush(), if any.
  void flush();

  /// Waits until every queued snapshot is written (or failed); throws nothing: the
  /// failures stay for take_errors(), submit() or flush().
  void wait_idle();

  /// The errors of writes that failed since the last call (or submit()/flush()), taken:
  /// for a caller that reports them and goes on.
  std::vector<FailedWrite> take_errors();

  /// True when nothing is queued or being written (a caller may skip a checkpoint rather
  /// than wait when this is false).
  bool idle() const;

  /// The last checkpoint written completely, if any.
  std::optional<WriteResult> last_written() const;

  /// The checkpoints written completely since the last call, in the order written, taken:
  /// for a caller that reports each one (a write that finished while the next was queued
  /// is among them, not only the newest).
  std::vector<WriteResult> take_written();

 private:
  void run();
  void throw_pending_errors_locked(std::unique_lock<std::mutex>& lock);
  void wait_idle_locked(std::unique_lock<std::mutex>& lock);  // nothing queued, nothing being written

  Filesystem& fs_;
  BackgroundWriterOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Snapshot> queue_;
  bool busy_ = false;  // the thread holds a snapshot taken off the queue
  bool stopping_ = false;
  std::vector<FailedWrite> errors_;
  std::optional<WriteResult> last_written_;
  std::vector<WriteResult> written_;  // since the last take_written()
  VerifiedCheckpoints verified_;  // the writer thread's alone: what pruning found intact
  std::thread thread_;  // last: started once everything above is initialised
};

}  // namespace conveyor::checkpoint
