#include "actors/checkpoint/shard_write_queue.hpp"

#include "actors/checkpoint/checkpoint_log.hpp"

namespace conveyor::checkpoint {

ShardWriteQueue::ShardWriteQueue() : thread_([this] { run(); }) {}

ShardWriteQueue::~ShardWriteQueue() {
  close();
  thread_.join();
}

bool ShardWriteQueue::submit(Task task) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return false;
    queue_.push_back(std::move(task));
  }
  changed_.notify_all();
  return true;
}

void ShardWriteQueue::close() {
  std::unique_lock lock(mutex_);
  closed_ = true;
  changed_.notify_all();  // an idle thread ends now
  changed_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

bool ShardWriteQueue::drain(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return queue_.empty() && !busy_; });
}

void ShardWriteQueue::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return closed_ || !queue_.empty(); });
    if (queue_.empty()) return;  // closed, nothing left: nothing can come any more
    Task task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    try {
      task();
    } catch (const std::exception& e) {
      checkpoint_log().error("a shard write ended with an error it did not report: {}", e.what());
    }
    lock.lock();
    busy_ = false;
    changed_.notify_all();
  }
}

}  // namespace conveyor::checkpoint
