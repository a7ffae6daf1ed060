#pragma once
// The decoder `conveyor sample --device` names (kernels/model/token_decoder.hpp): KvDecoder
// on the CPU (fp32, conveyor's reference kernels), CudaKvDecoder on cuda:N (bf16 weights
// and KV cache, fp32 accumulation, as training's CUDA stage computes). Generation and its
// sampling (generate.hpp) are the same host code for both: the same seed picks the same
// tokens wherever the two give the same logits.
#include <cstdint>
#include <memory>

#include "apps/hf/checkpoint_logits.hpp"
#include "kernels/model/token_decoder.hpp"
#include "kernels/tensor/device.hpp"

namespace conveyor {

/// Throws InputError naming the flag (`--device cuda:N: ...`) when `device` cannot run a
/// decoder here: no such GPU, or a conveyor built without CUDA. Cheap: call it before
/// reading the weights.
void require_sample_device(const Device& device);

/// A decoder of `model`'s weights with a cache of `positions` positions (at most the
/// model's seq_len) on `device`. Throws InputError as require_sample_device, or naming
/// --device and the reason for a model the GPU kernels do not take (a width not a multiple
/// of 8, a head size over 256); CudaError when the device fails (out of memory).
std::unique_ptr<TokenDecoder> make_sample_decoder(const CheckpointModel& model, const Device& device,
                                                  std::int64_t positions);

}  // namespace conveyor
