// CudaStageModel's training state (capture_state / restore_state, stage_model.hpp): the
// same names, shapes and dtypes as the CPU model's, a bitwise round trip into a fresh model
// in both optimizer recipes, a refused restore that changes nothing, and state moving
// between CPU and GPU stages bit for bit.
// Every TEST_CASE name starts with "cuda stage state" (`kernels_tests -tc='cuda stage state*'`).
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/copy.hpp"
#include "kernels/cuda/device_storage.hpp"
#include "kernels/cuda/model/cuda_stage_model.hpp"
#include "kernels/model/param_state.hpp"
#include "kernels/model/stage_model.hpp"
#include "kernels/model/state_names.hpp"
#include "kernels/optim/adamw.hpp"
#include "tests/kernels/cuda/cuda_stage_test_support.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"
#include "tests/kernels/model/gpt_test_util.hpp"

namespace conveyor {
namespace {

using namespace cuda_testing;

const StageSlice kHead{1, 1, false, true};     // block 1 + head: input from a device
const StageSlice kBlocks{0, 1, false, false};  // block 0 alone: gradient from a device
constexpr double kLr = 1e-2;

// One step's random inputs for a slice, the same values for a CPU and a GPU model: tokens
// and targets on the host; a stage input and output gradient (bf16-exact random values,
// never zero) as f32 on the host for the CPU and bf16 on cuda:0 for the GPU.
struct StepInputs {
  Tensor tokens, targets;      // i32 (B, T) host
  Tensor cpu_input, cpu_grad;  // f32 (B, T, C) host
  Tensor gpu_input, gpu_grad;  // bf16 (B, T, C) cuda:0, ready events recorded
};

// A bf16 copy on cuda:0 of bf16-exact `host` f32 values, handed over through its ready
// event (the models wait on it). `stream` must outlive the tensor's use.
Tensor device_bf16(const Tensor& host, cudaStream_t stream) {
  Tensor t = to_device(to_bf16_host(host), 0, stream);
  record_ready(t, stream);
  return t;
}

Tensor random_activation(std::uint64_t seed) {
  const auto n = static_cast<std::size_t>(kB * kT * kConfig.d_model);
  const std::vector<float> v = random_bf16(n, seed);
  Tensor t = Tensor::zeros({kB, kT, kConfig.d_model});
  for (std::size_t i = 0; i < v.size(); ++i) t.f32()[i] = v[i];
  return t;
}

StepInputs random_inputs(const StageSlice& slice, std::uint64_t seed, cudaStream_t stream) {
  StepInputs in;
  const testing::Batch batch = testing::random_batch(kB, kT, kConfig.vocab, seed);
  in.tokens = batch.tokens;
  if (slice.has_head) in.targets = batch.targets;
  if (!slice.has_embedding) {
    in.cpu_input = random_activation(seed + 1);
    in.gpu_input = device_bf16(in.cpu_input, stream);
  }
  if (!slice.has_head) {
    in.cpu_grad = random_activation(seed + 2);
    in.gpu_grad = device_bf16(in.cpu_grad, stream);
  }
  return in;
}

// Forward (with a stash) and backward of one micro-batch: the gradients accumulate.
void forward_backward(StageModel& model, const StageSlice& slice, const StepInputs& in, bool gpu) {
  const Tensor& input = slice.has_embedding ? in.tokens : (gpu ? in.gpu_input : in.cpu_input);
  StageForward f = model.forward(input, in.targets, /*keep_stash=*/true);
  REQUIRE(f.stash);
  model.backward(*f.stash, gpu ? in.gpu_grad : in.cpu_grad, 1.0f);
}

// forward_backward, then AdamW with the global norm clipped to 1 as the runtime does.
void train_step(StageModel& model, const StageSlice& slice, const StepInputs& in, bool gpu) {
  forward_backward(model, slice, in, gpu);
  double sq = 0;
  for (double s : model.grad_squares()) sq += s;
  model.optimizer_step(AdamWConfig{}, kLr, clip_scale(std::sqrt(sq), 1.0));
}

// Same names in the same order, same shapes and dtypes (values not compared).
void check_same_layout(const std::vector<NamedTensor>& want, const std::vector<NamedTensor>& got) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("tensor " << i << ": " << want[i].name);
    CHECK(got[i].name == want[i].name);
    CHECK(got[i].tensor.shape() == want[i].tensor.shape());
    CHECK(got[i].tensor.dtype() == DType::f32);
    CHECK(want[i].tensor.dtype() == DType::f32);
    CHECK(got[i].tensor.device().is_cpu());
  }
}

// Same names in the same order and the same bytes.
void check_bitwise(const std::vector<NamedTensor>& want, const std::vector<NamedTensor>& got) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("tensor " << want[i].name);
    CHECK(got[i].name == want[i].name);
    CHECK(testing::bitwise_equal(got[i].tensor, want[i].tensor));
  }
}

TEST_CASE("cuda stage state has the CPU model's names, shapes, dtypes before and after a step") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  TestStream stream;  // the inputs' stream: outlives every model below
  for (const StageSlice& slice : {kHead, kBlocks}) {
    for (bool master : {true, false}) {
      INFO("slice " << describe_slice(slice) << ", master_fp32 " << master);
      auto cpu = make_cpu_stage_model(kConfig, slice, kSeed);
      auto gpu = make_cuda_stage_model(kConfig, slice, kSeed, on_device(0, master));
      const std::size_t params = cpu->weights().size();

      // Before any step: the parameters alone, and exactly weights().
      const std::vector<NamedTensor> before = gpu->capture_state();
      CHECK(before.size() == params);
      check_same_layout(cpu->capture_state(), before);
      check_bitwise(gpu->weights(), before);
      CHECK(gpu->optimizer_steps() == 0);

      // After one step: each parameter followed by its opt.m and opt.v, as on the CPU.
      const StepInputs in = random_inputs(slice, 100 + (master ? 1 : 0), stream);
      train_step(*cpu, slice, in, /*gpu=*/false);
      train_step(*gpu, slice, in, /*gpu=*/true);
      const std::vector<NamedTensor> after = gpu->capture_state();
      CHECK(after.size() == 3 * params);
      check_same_layout(cpu->capture_state(), after);
      REQUIRE(after.size() >= 3);
      CHECK(after[1].name == opt_m_name(after[0].name));
      CHECK(after[2].name == opt_v_name(after[0].name));
      CHECK(gpu->optimizer_steps() == 1);
      CHECK(cpu->optimizer_steps() == 1);
    }
  }
}

TEST_CASE("cuda stage state restored into a fresh model continues bitwise, fp32 and bf16 master") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  TestStream stream;
  for (bool master : {true, false}) {
    INFO("master_fp32 " << master);
    auto a = make_cuda_stage_model(kConfig, kFull, kSeed, on_device(0, master));
    train_step(*a, kFull, random_inputs(kFull, 200, stream), true);
    train_step(*a, kFull, random_inputs(kFull, 201, stream), true);
    const std::vector<NamedTensor> state = a->capture_state();
    REQUIRE(a->optimizer_steps() == 2);

    // B: another seed, with gradients pending that the restore must drop.
    auto b = make_cuda_stage_model(kConfig, kFull, kSeed + 99, on_device(0, master));
    forward_backward(*b, kFull, random_inputs(kFull, 202, stream), true);
    b->restore_state(state, a->optimizer_steps());
    CHECK(b->optimizer_steps() == 2);
    check_bitwise(state, b->capture_state());

    // One more identical step on both: the same weights and optimizer state, bit for bit.
    const StepInputs next = random_inputs(kFull, 203, stream);
    train_step(*a, kFull, next, true);
    train_step(*b, kFull, next, true);
    check_bitwise(a->weights(), b->weights());
    check_bitwise(a->capture_state(), b->capture_state());
    CHECK(b->optimizer_steps() == 3);
  }
}

TEST_CASE("cuda stage state snapshot: taken in the background, restored into a fresh model bitwise") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  TestStream stream;
  for (bool master : {true, false}) {
    INFO("master_fp32 " << master);
    auto a = make_cuda_stage_model(kConfig, kFull, kSeed, on_device(0, master));
    const auto initial = a->snapshot();  // before any step: parameters only
    train_step(*a, kFull, random_inputs(kFull, 300, stream), true);
    train_step(*a, kFull, random_inputs(kFull, 301, stream), true);
    const std::vector<NamedTensor> state = a->capture_state();
    const auto snap = a->snapshot();
    // The next step runs while the snapshot copies; AdamW waits for them on the device,
    // so the snapshot still holds the state after two steps.
    const StepInputs next = random_inputs(kFull, 302, stream);
    train_step(*a, kFull, next, true);
    check_bitwise(state, snap->tensors());
    CHECK(snap->optimizer_steps() == 2);
    CHECK(initial->tensors().size() == a->weights().size());

    // A replacement model (another seed, gradients pending) takes the snapshot and
    // continues exactly as the original did; the original may be gone by then.
    auto b = make_cuda_stage_model(kConfig, kFull, kSeed + 7, on_device(0, master));
    forward_backward(*b, kFull, random_inputs(kFull, 303, stream), true);
    b->restore_snapshot(*snap);
    CHECK(b->optimizer_steps() == 2);
    check_bitwise(state, b->capture_state());
    a.reset();
    train_step(*b, kFull, next, true);
    auto c = make_cuda_stage_model(kConfig, kFull, kSeed, on_device(0, master));
    c->restore_state(state, 2);
    train_step(*c, kFull, next, true);
    check_bitwise(c->capture_state(), b->capture_state());

    // Into a CPU model: through the snapshot's named tensors.
    auto cpu = make_cpu_stage_model(kConfig, kFull, kSeed + 8);
    cpu->restore_snapshot(*snap);
    check_bitwise(state, cpu->capture_state());
  }
}

TEST_CASE("cuda stage state refuses a misshapen or missing tensor and changes nothing") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  TestStream stream;
  for (bool master : {true, false}) {
    INFO("master_fp32 " << master);
    auto source = make_cuda_stage_model(kConfig, kFull, kSeed, on_device(0, master));
    train_step(*source, kFull, random_inputs(kFull, 300, stream), true);
    const std::vector<NamedTensor> state = source->capture_state();

    auto target = make_cuda_stage_model(kConfig, kFull, kSeed + 7, on_device(0, master));
    train_step(*target, kFull, random_inputs(kFull, 301, stream), true);
    const std::vector<NamedTensor> untouched = target->capture_state();

    // The last tensor (the head's opt.v), so a restore that uploads as it checks would
    // already have changed everything before it.
    std::vector<NamedTensor> misshapen = state;
    const std::string bad = misshapen.back().name;
    const Shape wrong{misshapen.back().tensor.numel() + 1};
    misshapen.back().tensor = testing::random_f32(wrong, 302);
    CHECK_THROWS_WITH_AS(target->restore_state(misshapen, 1), doctest::Contains(bad.c_str()),
                         StateMismatch);
    CHECK_THROWS_WITH_AS(target->restore_state(misshapen, 1),
                         doctest::Contains(wrong.str().c_str()), StateMismatch);
    check_bitwise(untouched, target->capture_state());
    CHECK(target->optimizer_steps() == 1);

    // A missing parameter (the middle one) likewise.
    std::vector<NamedTensor> partial = state;
    const std::string missing = partial[partial.size() / 2].name;
    partial.erase(partial.begin() + static_cast<std::ptrdiff_t>(partial.size() / 2));
    CHECK_THROWS_WITH_AS(target->restore_state(partial, 1), doctest::Contains(missing.c_str()),
                         StateMismatch);
    check_bitwise(untouched, target->capture_state());
    CHECK(target->optimizer_steps() == 1);
  }
}

TEST_CASE("cuda stage state moves between CPU and GPU stages bitwise") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  TestStream stream;
  // CPU -> GPU (fp32 master): the GPU keeps the CPU's f32 parameters and moments exactly.
  auto cpu = make_cpu_stage_model(kConfig, kFull, kSeed);
  train_step(*cpu, kFull, random_inputs(kFull, 400, stream), false);
  const std::vector<NamedTensor> cpu_state = cpu->capture_state();
  REQUIRE(cpu_state.size() == 3 * cpu->weights().size());
  auto gpu = make_cuda_stage_model(kConfig, kFull, kSeed + 5, on_device(0, true));
  gpu->restore_state(cpu_state, cpu->optimizer_steps());
  CHECK(gpu->optimizer_steps() == 1);
  check_bitwise(cpu_state, gpu->capture_state());

  // GPU -> CPU, both recipes: the CPU stage holds what the GPU captured (bf16 widened).
  for (bool master : {true, false}) {
    INFO("master_fp32 " << master);
    auto from = make_cuda_stage_model(kConfig, kFull, kSeed, on_device(0, master));
    train_step(*from, kFull, random_inputs(kFull, 401, stream), true);
    const std::vector<NamedTensor> gpu_state = from->capture_state();
    auto to = make_cpu_stage_model(kConfig, kFull, kSeed + 6);
    to->restore_state(gpu_state, from->optimizer_steps());
    CHECK(to->optimizer_steps() == 1);
    check_bitwise(gpu_state, to->capture_state());
  }
}

}  // namespace
}  // namespace conveyor
#endif  // CONVEYOR_WITH_CUDA
