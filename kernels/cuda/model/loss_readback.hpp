#pragma once
// The head's loss per micro-batch, read back without stopping the stage's thread.
//
// Why: a stage thread that waits for the device after every head forward cannot queue any
// other work meanwhile: with two chunks on one GPU (ZBV), the other chunk's next forward —
// which needs nothing of the head — is queued only once the head's stream has drained, so
// the two streams stop overlapping at every micro-batch. The loss is needed only when the
// stage reports its step (StageWorker::take_report), after the gradient norms, which wait
// for the device anyway.
//
// How: a fixed pool of slots in pinned host memory mapped into the device's address space
// (the loss kernel writes its mean straight there: no copy-engine transfer, so a readback
// never queues behind a snapshot's device-to-host copies), an event per slot. acquire()
// hands out a free slot; pending() records the slot's event after the loss kernel and
// returns the function that waits for that event (a host sync on this one kernel) and
// reads the value. The slot is free again once that function and its copies are gone,
// called or not. Every pending function holds the pool: it may outlive the model. One more
// slot serves the reads made at once (no deferral asked, or every slot pending):
// read_now() waits for the stream.
//
// Thread-safety: none; one thread (the stage actor's) acquires and resolves.
#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/tensor/tensor.hpp"

namespace conveyor {

class LossReadback : public std::enable_shared_from_this<LossReadback> {
 public:
  /// `slots` >= 0 losses pending at a time on `device` (0: every read is immediate).
  static std::shared_ptr<LossReadback> create(int device, int slots);
  ~LossReadback();
  LossReadback(const LossReadback&) = delete;
  LossReadback& operator=(const LossReadback&) = delete;

  /// A free slot, or nullopt when every slot is pending (then read synchronously).
  std::optional<int> acquire();
  /// The device address the loss kernel writes slot `slot` at.
  float* device_slot(int slot) const { return device_base_ + slot; }
  /// After the kernel that writes `slot` is queued on `stream`: the function that waits
  /// for it and returns the value (throws CudaError if the wait fails).
  std::function<double()> pending(int slot, cudaStream_t stream);

  /// Where the loss kernel writes a loss read at once.
  float* immediate_slot() const { return device_base_ + in_use_.size(); }
  /// After that kernel is queued on `stream`: waits for the stream and returns the value.
  double read_now(cudaStream_t stream) const;

 private:
  LossReadback(int device, int slots);
  void release(int slot) { in_use_[static_cast<std::size_t>(slot)] = false; }

  int device_;
  Tensor host_;                    // pinned f32 (slots + 1: the immediate slot last)
  float* device_base_ = nullptr;   // host_ as the device addresses it
  std::vector<cudaEvent_t> written_;
  std::vector<bool> in_use_;
};

}  // namespace conveyor
