#pragma once
// Deterministic parameter initialisation. A parameter's initial values are a pure function
// of (seed, parameter name, element index): no state is shared between parameters, so
// the same parameter gets the same bits in whatever slice, stage or process builds it.
// The generator is counter-based and portable: splitmix64 of (key + index) feeds a
// Box-Muller transform computed in double.
#include <cstdint>
#include <string_view>

#include "kernels/tensor/tensor.hpp"

namespace conveyor {

/// The stream key of one parameter: FNV-1a of the name, mixed with the seed by splitmix64.
std::uint64_t param_stream_key(std::uint64_t seed, std::string_view name);

/// Fills an f32 tensor with Normal(0, stddev) values of the stream `key`; element i depends
/// only on (key, i).
void fill_normal(Tensor& tensor, std::uint64_t key, double stddev);

/// Fills an f32 tensor with `value`.
void fill_constant(Tensor& tensor, float value);

}  // namespace conveyor
