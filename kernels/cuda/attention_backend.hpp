#pragma once
// Which implementation runs one attention pass (attention.hpp's switch and fallback): used
// by the launchers in attention.cu. Kept out of the .cu so that nvcc never sees fmt.
#include <initializer_list>

#include "kernels/cuda/cudnn/cudnn_attention.hpp"

namespace conveyor::cuda_detail {

/// True when `pass` at this shape should run on cuDNN: the backend is cudnn, cuDNN can
/// build the pass's plan on the current device (the first call per shape builds it), and
/// every pointer is 16-byte aligned. Otherwise false, after a warning on stderr naming the
/// reason, once per (pass, shape) in the process.
bool attention_on_cudnn(AttentionPass pass, int B, int T, int C, int NH, int NKV,
                        std::initializer_list<const void*> pointers);

}  // namespace conveyor::cuda_detail
