// The coordinator's side of checkpoints: at the step boundaries its hook asks for, every
// stage's state reaches the hook (after the optimizer step, before the next step); a stop
// ends the run there; a run started from a captured state continues exactly.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "actors/checkpoint/reshard.hpp"
#include "actors/checkpoint/tensor_names.hpp"
#include "actors/runtime/empty_stage_model.hpp"
#include "actors/job/checkpoint_hook.hpp"
#include "actors/runtime/run_job.hpp"
#include "tests/actors/support/tiny_job.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

struct Taken {
  std::int64_t steps_done = 0;
  bool stop = false;
  std::vector<checkpoint::StageShard> shards;
};

// Snapshots every `every` steps, stops after `stop_after` steps (0: never) or, with
// `stop_in_eval`, at the first wave boundary of the evaluation after that many steps;
// starts at `first`. Records what happened in `events`, in order.
struct HookObserver final : TrainingObserver, CheckpointHook {
  std::int64_t every = 0, stop_after = 0, first = 0, stop_in_eval = 0;
  std::vector<StepMetrics> steps;
  std::vector<EvalMetrics> evals;
  std::vector<std::string> events;
  std::vector<Taken> taken;
  void on_step(const StepMetrics& m, const std::vector<StageReport>&) override {
    steps.push_back(m);
    events.push_back("step " + std::to_string(m.step));
  }
  void on_eval(const EvalMetrics& m) override {
    evals.push_back(m);
    events.push_back("eval " + std::to_string(m.step));
  }
  std::int64_t first_step() const override { return first; }
  BoundaryDecision at_boundary(std::int64_t done) override {
    BoundaryDecision d;
    d.stop = stop_after > 0 && done == stop_after;
    d.snapshot = d.stop || (every > 0 && done % every == 0);
    return d;
  }
  bool stop_during_eval(std::int64_t done) override {
    events.push_back("asked " + std::to_string(done));
    return stop_in_eval > 0 && done == stop_in_eval;
  }
  void take(std::int64_t done, std::vector<checkpoint::StageShard> shards, std::int64_t /*optimizer_steps*/,
            bool stop) override {
    for (auto& s : shards)  // shards taken from in-memory snapshots come as producers
      if (s.produce) s.tensors = s.produce();
    taken.push_back(Taken{done, stop, std::move(shards)});
  }
};

std::map<std::string, Tensor> by_name(const std::vector<checkpoint::StageShard>& shards) {
  std::map<std::string, Tensor> out;
  for (const auto& s : shards)
    for (const auto& t : s.tensors) out.emplace(t.name, t.tensor);
  return out;
}

// Stage models restored from `state` (the shards of a snapshot), split by name.
StageModelFactory restoring(std::shared_ptr<const std::map<std::string, Tensor>> state,
                            std::int64_t optimizer_steps) {
  return [=](const GptConfig& model, const StageSlice& slice, std::uint64_t seed, Device device,
             float loss_scale) -> std::unique_ptr<StageModel> {
    auto m = make_cpu_stage_model(model, slice, seed, device, loss_scale);
    std::vector<NamedTensor> mine;
    for (const auto& t : m->weights())
      for (const auto& name : {t.name, checkpoint::opt_m_name(t.name), checkpoint::opt_v_name(t.name)})
        mine.push_back({name, state->at(name)});
    m->restore_state(mine, optimizer_steps);
    return m;
  };
}

Job stateful_job(std::int64_t steps, int stages = 2) {
  TinyJobOptions o;
  o.steps = steps;
  o.stages = stages;
  return tiny_job(o);  // CPU stage models: their state can be captured
}

// The hook is both the run's observer and its checkpoint hook, as the app's is.
TrainResult run_with_hook(Job job, HookObserver& hook) {
  job.services.checkpoints = &hook;
  return run_training(job, hook);
}

}  // namespace

TEST_CASE("the coordinator hands every stage's weights and AdamW state to the hook at the boundaries it asks for") {
  HookObserver hook;
  hook.every = 2;
  const TrainResult result = run_with_hook(stateful_job(5), hook);
  CHECK(hook.steps.size() == 5);
  REQUIRE(hook.taken.size() == 2);
  CHECK(hook.taken[0].steps_done == 2);
  CHECK(hook.taken[1].steps_done == 4);
  for (const auto& t : hook.taken) {
    CHECK_FALSE(t.stop);
    REQUIRE(t.shards.size() == 2);
    CHECK(t.shards[0].stage == 0);
    CHECK(t.shards[1].stage == 1);
    const auto tensors = by_name(t.shards);
    for (const auto& w : result.weights) {
      CAPTURE(w.name);
      CHECK(tensors.count(w.name) == 1);
      CHECK(tensors.count(checkpoint::opt_m_name(w.name)) == 1);
      CHECK(tensors.count(checkpoint::opt_v_name(w.name)) == 1);
    }
    CHECK(tensors.size() == 3 * result.weights.size());
  }
  // Host copies: the snapshot after 4 steps does not follow the 5th step's update.
  const auto after4 = by_name(hook.taken[1].shards);
  const auto& w = result.weights.front();
  CHECK(std::memcmp(after4.at(w.name).raw(), w.tensor.raw(), w.tensor.bytes()) != 0);
}

TEST_CASE("a stop at a boundary snapshots, ends the run there and gathers no weights") {
  HookObserver hook;
  hook.stop_after = 2;
  const TrainResult result = run_with_hook(stateful_job(5), hook);
  CHECK(hook.steps.size() == 2);
  REQUIRE(hook.taken.size() == 1);
  CHECK(hook.taken[0].steps_done == 2);
  CHECK(hook.taken[0].stop);
  CHECK(result.weights.empty());
}

TEST_CASE("a run started from a snapshot after 2 of 4 steps ends bitwise identical to one that never stopped, also on another stage count") {
  HookObserver full;
  full.every = 2;
  const TrainResult uninterrupted = run_with_hook(stateful_job(4), full);
  REQUIRE(full.taken.size() == 2);
  auto state = std::make_shared<const std::map<std::string, Tensor>>(by_name(full.taken[0].shards));
  for (int stages : {2, 4, 1}) {
    CAPTURE(stages);
    Job job = stateful_job(4, stages);
    job.plan.make_model = restoring(state, 2);
    HookObserver resumed;
    resumed.first = 2;
    const TrainResult got = run_with_hook(job, resumed);
    REQUIRE(resumed.steps.size() == 2);
    CHECK(resumed.steps[0].step == 2);
    CHECK(resumed.steps[0].loss == full.steps[2].loss);
    CHECK(resumed.steps[1].loss == full.steps[3].loss);
    CHECK(same_bits(got.weights, uninterrupted.weights));
  }
}

TEST_CASE("a stage whose model cannot be captured fails the run naming the stage") {
  HookObserver hook;
  hook.every = 1;
  TinyJobOptions o;
  o.steps = 2;
  Job job = tiny_job(o);
  job.plan.make_model = empty_stage_model_factory(job.plan.data.micro_batch_size);
  CHECK_THROWS_WITH_AS(run_with_hook(job, hook), doctest::Contains("cannot be captured"),
                       std::runtime_error);
}

TEST_CASE("an evaluation runs in waves with the val loss of one pass, and a stop between waves drops it and stops at the boundary before it") {
  // 100 eval micro-batches: waves of 16 on one stage (16 per model stage), of 64 on four.
  auto job_with_eval = [](int stages) {
    Job job = stateful_job(4, stages);
    job.plan.eval_every = 2;
    job.plan.eval_batches = 100;
    return job;
  };
  HookObserver one, four;
  const TrainResult a = run_with_hook(job_with_eval(1), one);
  const TrainResult b = run_with_hook(job_with_eval(4), four);
  REQUIRE(one.evals.size() == 2);
  REQUIRE(four.evals.size() == 2);
  for (std::size_t e = 0; e < 2; ++e) CHECK(one.evals[e].val_loss == four.evals[e].val_loss);
  CHECK(same_bits(a.weights, b.weights));
  // The hook was asked between waves only: 6 times per evaluation on one stage (7 waves),
  // once on four (2 waves); never after the last wave.
  CHECK(std::count(one.events.begin(), one.events.end(), "asked 2") == 6);
  CHECK(std::count(four.events.begin(), four.events.end(), "asked 2") == 1);

  HookObserver stopped;
  stopped.stop_in_eval = 2;
  const TrainResult s = run_with_hook(job_with_eval(4), stopped);
  CHECK(stopped.events == std::vector<std::string>{"step 0", "step 1", "asked 2"});
  REQUIRE(stopped.taken.size() == 1);
  CHECK(stopped.taken[0].steps_done == 2);
  CHECK(stopped.taken[0].stop);
  CHECK(s.weights.empty());
  CHECK_FALSE(s.final_eval_dropped);
}

TEST_CASE("a stop during the evaluation after the last step drops it and still gathers the weights") {
  Job job = stateful_job(2);
  job.plan.eval_batches = 40;  // two waves (32, 8) on two stages
  HookObserver hook;
  hook.stop_in_eval = 2;
  const TrainResult r = run_with_hook(job, hook);
  CHECK(hook.events == std::vector<std::string>{"step 0", "step 1", "asked 2"});
  CHECK(hook.taken.empty());  // the weights stand for the checkpoint
  CHECK(r.final_eval_dropped);
  CHECK_FALSE(r.weights.empty());
}

TEST_CASE("a resumed run first runs the evaluation due after its checkpoint's step") {
  HookObserver full;
  full.every = 2;
  Job job = stateful_job(4);
  job.plan.eval_every = 2;
  const TrainResult uninterrupted = run_with_hook(job, full);
  REQUIRE(full.evals.size() == 2);
  auto state = std::make_shared<const std::map<std::string, Tensor>>(by_name(full.taken[0].shards));
  job.plan.make_model = restoring(state, 2);
  HookObserver resumed;
  resumed.first = 2;
  const TrainResult got = run_with_hook(job, resumed);
  CHECK(resumed.events == std::vector<std::string>{"eval 1", "step 2", "step 3", "eval 3"});
  REQUIRE(resumed.evals.size() == 2);
  CHECK(resumed.evals[0].val_loss == full.evals[0].val_loss);
  CHECK(resumed.evals[1].val_loss == full.evals[1].val_loss);
  CHECK(same_bits(got.weights, uninterrupted.weights));
}
