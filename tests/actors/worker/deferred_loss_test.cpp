// A model that reads its loss back later (StageForward::pending_loss, as the CUDA model
// does for the runtime): the stage worker asks for each loss only when it reports, the
// report holds the very values an immediate read gives, and an aborted plan drops them
// unasked.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "actors/worker/stage_worker.hpp"
#include "tests/actors/support/tiny_job.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

// What the deferring models share: how many losses were asked for, and a token every
// pending function holds (its use count: how many such functions are alive).
struct Ledger {
  int asked = 0;
  std::shared_ptr<int> token = std::make_shared<int>(0);
};

// The CPU model with its loss handed out as pending_loss.
class DeferringModel final : public StageModel {
 public:
  DeferringModel(std::unique_ptr<StageModel> inner, Ledger& ledger)
      : inner_(std::move(inner)), ledger_(ledger) {}
  StageForward forward(const Tensor& input, const Tensor& targets, bool keep_stash) override {
    StageForward out = inner_->forward(input, targets, keep_stash);
    if (!out.activation.defined()) {
      const double value = out.loss;
      out.loss = std::nan("");
      out.pending_loss = [value, &ledger = ledger_, token = ledger_.token] {
        ++ledger.asked;
        return value;
      };
    }
    return out;
  }
  Tensor backward(StageStash& s, const Tensor& g, float scale) override {
    return inner_->backward(s, g, scale);
  }
  Tensor backward_input(StageStash& s, const Tensor& g, float scale) override {
    return inner_->backward_input(s, g, scale);
  }
  void backward_weight(StageStash& s) override { inner_->backward_weight(s); }
  std::vector<double> grad_squares() const override { return inner_->grad_squares(); }
  void optimizer_step(const AdamWConfig& c, double lr, float scale) override {
    inner_->optimizer_step(c, lr, scale);
  }
  void discard_gradients() override { inner_->discard_gradients(); }
  std::vector<NamedTensor> weights() const override { return inner_->weights(); }

 private:
  std::unique_ptr<StageModel> inner_;
  Ledger& ledger_;
};

struct LastStage {
  Job job = tiny_job(TinyJobOptions{});  // 2 stages, 1f1b, 4 micro-batches
  Ledger ledger;
  StageModelFactory deferring = [this](const GptConfig& c, const StageSlice& s, std::uint64_t seed,
                                       Device d, float loss_scale) -> std::unique_ptr<StageModel> {
    return std::make_unique<DeferringModel>(make_cpu_stage_model(c, s, seed, d, loss_scale), ledger);
  };
  std::vector<PipeMessage> sent;
  StageWorker::Outbox outbox = [this](PipeMessage m) { sent.push_back(std::move(m)); };

  StageWorker worker(bool defer) {
    return StageWorker{job.plan.model, job.plan.placement.ranks[1], job.plan.placement.model_stages(), job.plan.data,
                       StageWorker::Clock::now(),
                       defer ? deferring : StageModelFactory(make_cpu_stage_model)};
  }
  StepPlan plan(std::int64_t round) const {
    return StepPlan{round, 0, Phase::train,
                    std::make_shared<const std::vector<sched::Action>>(job.plan.schedule.ranks[1])};
  }
  // Not zeros: each micro-batch's activation differs, so do the losses.
  PipeMessage activation(std::int64_t round, int mb) const {
    Tensor x = Tensor::zeros(Shape{2, job.plan.model.seq_len, job.plan.model.d_model});
    float* p = x.f32();
    for (std::int64_t i = 0; i < x.numel(); ++i)
      p[i] = 0.01f * static_cast<float>((i * 7 + mb * 13) % 29) - 0.14f;
    return PipeMessage{PipeKind::activation, round, 0, Phase::train, mb, 0, 1, std::move(x)};
  }
  StageReport run(StageWorker& w) {
    w.begin(plan(1));
    for (int mb = 0; mb < 4; ++mb) w.accept(activation(1, mb));
    w.run_ready(outbox);
    REQUIRE(w.finished());
    return w.take_report();
  }
};

}  // namespace

TEST_CASE("deferred losses are read at the report, with the values of an immediate read") {
  LastStage t;
  StageWorker plain = t.worker(false);
  const StageReport want = t.run(plain);

  StageWorker deferring = t.worker(true);
  deferring.begin(t.plan(1));
  for (int mb = 0; mb < 4; ++mb) deferring.accept(t.activation(1, mb));
  deferring.run_ready(t.outbox);
  REQUIRE(deferring.finished());
  CHECK(t.ledger.asked == 0);               // nothing asked while the plan ran
  CHECK(t.ledger.token.use_count() == 5);   // four pending, held by the worker
  const StageReport got = deferring.take_report();
  CHECK(t.ledger.asked == 4);
  CHECK(t.ledger.token.use_count() == 1);   // none kept past the report
  REQUIRE(got.losses.size() == want.losses.size());
  for (std::size_t i = 0; i < want.losses.size(); ++i) {
    CAPTURE(i);
    CHECK(got.losses[i].first == want.losses[i].first);
    CHECK(std::isfinite(got.losses[i].second));
    CHECK(got.losses[i].second == want.losses[i].second);
  }
}

TEST_CASE("an aborted plan drops its deferred losses unasked") {
  LastStage t;
  StageWorker w = t.worker(true);
  w.begin(t.plan(1));
  w.accept(t.activation(1, 0));
  w.accept(t.activation(1, 1));
  w.run_ready(t.outbox);
  CHECK(t.ledger.token.use_count() > 1);
  w.abort(1);
  CHECK(t.ledger.token.use_count() == 1);
  CHECK(t.ledger.asked == 0);
  // The next plan reports its own losses only.
  const StageReport next = [&] {
    w.begin(t.plan(2));
    for (int mb = 0; mb < 4; ++mb) w.accept(t.activation(2, mb));
    w.run_ready(t.outbox);
    REQUIRE(w.finished());
    return w.take_report();
  }();
  CHECK(next.losses.size() == 4);
  CHECK(t.ledger.asked == 4);
}
