#pragma once
// Keeps a stream's GPU busy for a while, so that what the host queues behind it meanwhile
// (descriptor set-up, launches) starts back to back: a timing taken from an event queued
// after the spin measures the device's time alone, not the host's launch overhead.
#include <cuda_runtime.h>

namespace conveyor {

/// Queues one single-thread kernel on `stream` that runs for about `microseconds` of the
/// device's clock. REQUIRES: microseconds > 0; the current device is the stream's.
void gpu_spin(cudaStream_t stream, double microseconds);

}  // namespace conveyor
