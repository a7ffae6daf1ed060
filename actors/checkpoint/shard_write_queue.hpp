#pragma once
// Where a process other than node 0 writes its own stages' shards (checkpoint.writers:
// every_node): a thread of its own, one write at a time in the order asked, so that a
// stage actor hands the write over and goes on with its steps. A write that cannot
// finish is its task's to report (tasks do not throw; one that does is logged).
//
// The process closes it before its actor system ends (close(), and the destructor): every
// write it accepted is then finished and reported to node 0, and none starts later (a
// task may use the actor system to report).
// Thread-safety: submit() and drain() may be called from any thread.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace conveyor::checkpoint {

class ShardWriteQueue {
 public:
  using Task = std::function<void()>;
  ShardWriteQueue();
  /// close(), then ends the thread.
  ~ShardWriteQueue();
  ShardWriteQueue(const ShardWriteQueue&) = delete;
  ShardWriteQueue& operator=(const ShardWriteQueue&) = delete;

  /// Queues `task`; false (the task dropped) once closed.
  bool submit(Task task);
  /// Waits until every task submitted so far has run, at most `timeout`; false when some
  /// have not.
  bool drain(std::chrono::milliseconds timeout);
  /// Takes no more tasks, then waits (without a bound) until every accepted one has run.
  void close();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Task> queue_;
  bool busy_ = false;
  bool closed_ = false;
  std::thread thread_;  // last: started once everything above is initialised
};

}  // namespace conveyor::checkpoint
