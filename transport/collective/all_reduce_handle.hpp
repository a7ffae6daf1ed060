#pragma once
// The pending all-reduce of one bucket, returned by GradientAllReduce::start().
//
// What must hold: the bucket's buffers stay valid and untouched by the caller until wait()
// returned (or done() returned true); a handle does not outlive its group.
// Thread-safety: wait() and done() may be called from any one thread at a time.
namespace conveyor {

class AllReduceHandle {
 public:
  virtual ~AllReduceHandle() = default;

  /// Returns once the bucket holds the group's result; bounded by the group's timeout.
  /// Throws CollectiveError (CollectiveTimeout when a peer did not take part in time).
  /// Calling it again after it returned returns at once.
  virtual void wait() = 0;
  /// True when wait() would return at once; never blocks. Throws what wait() would throw.
  virtual bool done() = 0;
  /// After wait() returned (or done() returned true): how long the reduction itself ran,
  /// in ms — device events around it for NCCL, the worker thread's clock for Gloo; 0 for a
  /// group of one or an empty bucket. What the reduction costs, whether hidden or not.
  virtual double elapsed_ms() const = 0;
};

}  // namespace conveyor
