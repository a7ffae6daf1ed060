#include "actors/runtime/layer_profiler.hpp"

#include <algorithm>
#include <chrono>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/error.hpp"
#include "kernels/model/gpt_stage.hpp"

namespace conveyor {
namespace {

using Clock = std::chrono::steady_clock;

double elapsed_us(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Tensor random_tokens(std::int64_t B, std::int64_t T, std::int64_t V, std::mt19937_64& rng) {
  Tensor t = Tensor::zeros({B, T}, DType::i32);
  for (std::int64_t k = 0; k < t.numel(); ++k) t.i32()[k] = static_cast<std::int32_t>(rng() % V);
  return t;
}

Tensor random_f32(Shape shape, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Tensor t = Tensor::zeros(std::move(shape));
  for (float& x : t.f32_span()) x = dist(rng);
  return t;
}

// Times one slice: forward, backward_input, backward_weight on the same micro-batch.
sched::UnitCost profile_slice(const GptConfig& config, const StageSlice& slice, const ProfileOptions& o) {
  GptStage stage(config, slice, o.seed);
  std::mt19937_64 rng(o.seed);
  const std::int64_t B = o.micro_batch_size, T = config.seq_len, C = config.d_model;
  const Tensor input = slice.has_embedding ? random_tokens(B, T, config.vocab, rng) : random_f32({B, T, C}, rng);
  const Tensor targets = random_tokens(B, T, config.vocab, rng);
  const Tensor grad = slice.has_head ? Tensor{} : random_f32({B, T, C}, rng);

  std::vector<double> f, i, w;
  std::size_t stash_bytes = 0;
  for (int rep = 0; rep <= o.repetitions; ++rep) {  // rep 0 warms up
    const auto t0 = Clock::now();
    StageForward fwd = stage.forward(input, targets, /*keep_stash=*/true);
    const auto t1 = Clock::now();
    const std::size_t after_forward = fwd.stash->bytes();
    stage.backward_input(*fwd.stash, grad, 1.0f);
    const auto t2 = Clock::now();
    const std::size_t after_input = fwd.stash->bytes();
    stage.backward_weight(*fwd.stash);
    const auto t3 = Clock::now();
    stash_bytes = std::max({stash_bytes, after_forward, after_input});
    if (rep == 0) continue;
    f.push_back(elapsed_us(t0, t1));
    i.push_back(elapsed_us(t1, t2));
    w.push_back(elapsed_us(t2, t3));
  }
  sched::UnitCost u;
  u.f_us = median(f);
  u.i_us = median(i);
  u.w_us = median(w);
  u.activation_bytes = static_cast<double>(stash_bytes);
  for (const Param& p : stage.params()) u.param_bytes += 4.0 * static_cast<double>(p.value.bytes());
  return u;
}

}  // namespace

sched::ModelCosts profile_layers(const GptConfig& config, const ProfileOptions& o) {
  if (o.micro_batch_size < 1 || o.repetitions < 1) {
    throw InputError("layer profiler: micro_batch_size and repetitions must be >= 1, got " +
                     std::to_string(o.micro_batch_size) + " and " + std::to_string(o.repetitions));
  }
  sched::ModelCosts costs;
  try {
    StageSlice embedding;
    embedding.has_embedding = true;
    StageSlice head;
    head.has_head = true;
    costs.units.push_back(profile_slice(config, embedding, o));
    const sched::UnitCost attention = profile_slice(config, StageSlice::of_halves(0, 1, false, false), o);
    const sched::UnitCost mlp = profile_slice(config, StageSlice::of_halves(1, 1, false, false), o);
    for (std::int64_t b = 0; b < config.layers; ++b) {
      costs.units.push_back(attention);
      costs.units.push_back(mlp);
    }
    costs.units.push_back(profile_slice(config, head, o));
  } catch (const std::invalid_argument& e) {
    throw InputError(std::string("layer profiler: ") + e.what());
  }
  costs.source = "measured on this CPU (median of " + std::to_string(o.repetitions) + " runs, micro-batch of " +
                 std::to_string(o.micro_batch_size) + " x " + std::to_string(config.seq_len) + " tokens)";
  return costs;
}

}  // namespace conveyor
