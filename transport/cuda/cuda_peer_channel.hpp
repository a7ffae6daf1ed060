#pragma once
#include <memory>

#include "transport/tensor_channel.hpp"

namespace conveyor {

/// The receiving side into GPU `device`: a tensor already on it is handed over as it is;
/// one on another GPU is copied with cudaMemcpyPeerAsync on this channel's copy stream,
/// ordered after the producer's ready event, and carries its own ready event. The source
/// handle is kept until its copy has completed (the producer's allocator may otherwise
/// reuse the block while the copy engine still reads it).
std::unique_ptr<TensorChannel> make_cuda_peer_channel(int device);

}  // namespace conveyor
