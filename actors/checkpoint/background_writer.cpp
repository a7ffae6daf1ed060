#include "actors/checkpoint/background_writer.hpp"

#include <utility>

#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/checkpoint_log.hpp"

namespace conveyor::checkpoint {
namespace {

// Checked before the thread starts: a constructor that throws after it would terminate.
BackgroundWriterOptions checked(BackgroundWriterOptions o) {
  if (o.keep < 1)
    throw std::invalid_argument("checkpoint writer: keep must be at least 1, got " + std::to_string(o.keep));
  if (o.capacity < 1) throw std::invalid_argument("checkpoint writer: capacity must be at least 1");
  if (o.checkpoint_dir.empty()) throw std::invalid_argument("checkpoint writer: checkpoint_dir is empty");
  return o;
}

}  // namespace

BackgroundWriter::BackgroundWriter(Filesystem& fs, BackgroundWriterOptions options)
    : fs_(fs), options_(checked(std::move(options))), thread_([this] { run(); }) {}

BackgroundWriter::~BackgroundWriter() {
  {
    std::unique_lock lock(mutex_);
    wait_idle_locked(lock);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
  for (const auto& e : errors_) checkpoint_log().error("{} (reported at shutdown)", e.message);
}

void BackgroundWriter::throw_pending_errors_locked(std::unique_lock<std::mutex>&) {
  if (errors_.empty()) return;
  std::string message = errors_.front().message;
  if (errors_.size() > 1)
    message += " (and " + std::to_string(errors_.size() - 1) + " more failed checkpoint writes: ";
  for (std::size_t i = 1; i < errors_.size(); ++i) message += (i > 1 ? "; " : "") + errors_[i].message;
  if (errors_.size() > 1) message += ")";
  errors_.clear();
  throw CheckpointError(options_.checkpoint_dir, "background checkpoint write failed: " + message);
}

void BackgroundWriter::submit(Snapshot snapshot) {
  std::unique_lock lock(mutex_);
  throw_pending_errors_locked(lock);
  if (queue_.size() >= options_.capacity) {
    checkpoint_log().warn("writer is behind ({} queued); step {} waits for the disk",
                 queue_.size(), snapshot.manifest.step);
    changed_.wait(lock, [&] { return queue_.size() < options_.capacity; });
  }
  queue_.push_back(std::move(snapshot));
  changed_.notify_all();
}

void BackgroundWriter::wait_idle_locked(std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

void BackgroundWriter::flush() {
  std::unique_lock lock(mutex_);
  wait_idle_locked(lock);
  throw_pending_errors_locked(lock);
}

void BackgroundWriter::wait_idle() {
  std::unique_lock lock(mutex_);
  wait_idle_locked(lock);
}

std::vector<FailedWrite> BackgroundWriter::take_errors() {
  std::lock_guard lock(mutex_);
  return std::exchange(errors_, {});
}

bool BackgroundWriter::idle() const {
  std::lock_guard lock(mutex_);
  return queue_.empty() && !busy_;
}

std::optional<WriteResult> BackgroundWriter::last_written() const {
  std::lock_guard lock(mutex_);
  return last_written_;
}

std::vector<WriteResult> BackgroundWriter::take_written() {
  std::lock_guard lock(mutex_);
  return std::exchange(written_, {});
}

void BackgroundWriter::run() {
  for (;;) {
    Snapshot snapshot;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      snapshot = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    changed_.notify_all();  // a submit() waiting for room may go on

    const auto step = snapshot.manifest.step;
    double mb = 0;
    std::optional<WriteResult> result;
    FailedWrite failed{step, "", std::nullopt};
    try {
      snapshot.materialize();  // here, not on the step loop's thread
      mb = static_cast<double>(snapshot.tensor_bytes()) / 1e6;
      checkpoint_log().debug("writing step {} ({:.1f} MB) under {}", step, mb, options_.checkpoint_dir);
      result = write_checkpoint(fs_, options_.checkpoint_dir, snapshot, options_.keep, &verified_);
    } catch (const std::exception& e) {
      failed.message = "step " + std::to_string(step) + ": " + e.what();
      if (const auto* c = dynamic_cast<const CheckpointError*>(&e)) failed.lost_node = c->lost_node();
    }
    snapshot = Snapshot{};  // free the host copy before reporting

    if (!result) {
      checkpoint_log().error("{}", failed.message);
    } else {
      if (result->placed_bytes > 0)
        checkpoint_log().info("step {} written to {} ({:.1f} MB here and {:.1f} MB by the other nodes, in {:.2f} s)",
                              step, result->path, static_cast<double>(result->bytes - result->placed_bytes) / 1e6,
                              static_cast<double>(result->placed_bytes) / 1e6, result->seconds);
      else
        checkpoint_log().info("step {} written to {} ({:.1f} MB in {:.2f} s, {:.0f} MB/s)", step, result->path, mb,
                              result->seconds, result->seconds > 0 ? mb / result->seconds : 0.0);
      for (const auto& w : result->warnings) checkpoint_log().warn("{}", w);
    }
    {
      std::lock_guard lock(mutex_);
      if (result) {
        written_.push_back(*result);
        last_written_ = std::move(result);
      }
      else errors_.push_back(std::move(failed));
      busy_ = false;
    }
    changed_.notify_all();
  }
}

}  // namespace conveyor::checkpoint
