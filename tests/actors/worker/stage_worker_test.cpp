// The stage worker checks every incoming message against its plan.
#include <doctest/doctest.h>

#include "actors/worker/stage_worker.hpp"
#include "tests/actors/support/tiny_job.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

struct Rank1 {
  Job job = tiny_job(TinyJobOptions{});  // 2 stages, 1f1b, 4 micro-batches
  StageWorker worker{job.plan.model, job.plan.placement.ranks[1], job.plan.placement.model_stages(), job.plan.data,
                     StageWorker::Clock::now()};
  std::vector<PipeMessage> sent;
  StageWorker::Outbox outbox = [this](PipeMessage m) { sent.push_back(std::move(m)); };

  StepPlan plan(std::int64_t round, std::int64_t step) {
    return StepPlan{round, step, Phase::train,
                    std::make_shared<const std::vector<sched::Action>>(job.plan.schedule.ranks[1])};
  }
  PipeMessage activation(std::int64_t round, std::int64_t step, int mb, Shape shape) {
    return PipeMessage{PipeKind::activation, round, step, Phase::train, mb, 0, 1,
                       Tensor::zeros(std::move(shape))};
  }
  Shape good() const { return Shape{2, job.plan.model.seq_len, job.plan.model.d_model}; }
};

}  // namespace

TEST_CASE("a stage runs its plan as activations arrive and sends gradients back") {
  Rank1 t;
  t.worker.begin(t.plan(1, 0));
  t.worker.run_ready(t.outbox);
  CHECK(t.sent.empty());  // F0 waits for its activation
  t.worker.accept(t.activation(1, 0, 0, t.good()));
  t.worker.run_ready(t.outbox);
  REQUIRE(t.sent.size() == 1);  // F0 then B0 ran: the gradient of micro-batch 0 went back
  CHECK(t.sent[0].kind == PipeKind::gradient);
  CHECK(t.sent[0].micro_batch == 0);
  CHECK(t.sent[0].to_model_stage == 0);
  CHECK(t.sent[0].tensor.shape() == t.good());
  for (int mb = 1; mb < 4; ++mb) t.worker.accept(t.activation(1, 0, mb, t.good()));
  t.worker.run_ready(t.outbox);
  CHECK(t.worker.finished());
  const StageReport report = t.worker.take_report();
  CHECK(report.losses.size() == 4);
  CHECK(report.timings.size() == 8);
  CHECK(report.grad_squares.size() == 1);
}

TEST_CASE("a message for a micro-batch the plan does not expect is refused") {
  Rank1 t;
  t.worker.begin(t.plan(1, 0));
  try {
    t.worker.accept(t.activation(1, 0, 9, t.good()));
    FAIL("accepted a message for micro-batch 9");
  } catch (const ProtocolError& e) {
    CHECK(std::string(e.what()).find("micro-batch 9") != std::string::npos);
    CHECK(std::string(e.what()).find("no pending F") != std::string::npos);
  }
}

TEST_CASE("a message of the wrong shape is refused with the expected and actual shapes") {
  Rank1 t;
  t.worker.begin(t.plan(1, 0));
  try {
    t.worker.accept(t.activation(1, 0, 0, Shape{2, t.job.plan.model.seq_len, 7}));
    FAIL("accepted a wrong shape");
  } catch (const ProtocolError& e) {
    const std::string what = e.what();
    CHECK(what.find("expected f32 (2, 16, 32)") != std::string::npos);
    CHECK(what.find("(2, 16, 7)") != std::string::npos);
  }
}

TEST_CASE("a duplicate message and a message for another step are refused") {
  Rank1 t;
  t.worker.begin(t.plan(1, 0));
  t.worker.accept(t.activation(1, 0, 2, t.good()));
  CHECK_THROWS_AS(t.worker.accept(t.activation(1, 0, 2, t.good())), ProtocolError);
  CHECK_THROWS_AS(t.worker.accept(t.activation(1, 5, 3, t.good())), ProtocolError);
  CHECK_THROWS_AS(t.worker.accept(t.activation(7, 0, 3, t.good())), ProtocolError);
}

TEST_CASE("a message for the next plan that arrives early is held until that plan begins") {
  Rank1 t;
  t.worker.accept(t.activation(1, 0, 0, t.good()));  // before any plan
  t.worker.begin(t.plan(1, 0));
  t.worker.run_ready(t.outbox);
  CHECK(t.sent.size() == 1);
}

TEST_CASE("a plan for the wrong round is refused") {
  Rank1 t;
  CHECK_THROWS_AS(t.worker.begin(t.plan(2, 0)), ProtocolError);
}
