// The stage actor turns a protocol violation into an actor failure whose reason names it.
#include <doctest/doctest.h>

#include <caf/all.hpp>

#include "actors/messages/error_text.hpp"
#include "actors/stage/stage_actor.hpp"
#include "tests/actors/support/tiny_job.hpp"

using namespace conveyor;
using namespace conveyor::testing;

TEST_CASE("a stage actor sent a message for the wrong micro-batch fails with a clear reason") {
  auto job = std::make_shared<const Job>(tiny_job(TinyJobOptions{}));
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", 2);
  caf::actor_system system{cfg};
  auto stage = system.spawn<caf::detached>(stage_actor, job, 1, StageWorker::Clock::now(), nullptr, true);
  caf::scoped_actor self{system};
  self->monitor(stage);
  self->send(stage, PeerTable{{stage, stage}});
  self->send(stage, StepPlan{1, 0, Phase::train,
                             std::make_shared<const std::vector<sched::Action>>(
                                 job->plan.schedule.ranks[1])});
  self->send(stage, PipeMessage{PipeKind::activation, 1, 0, Phase::train, 6, 0, 1,
                                Tensor::zeros({2, job->plan.model.seq_len, job->plan.model.d_model})});
  std::string reason;
  self->receive([&](caf::down_msg& down) { reason = error_text(system, down.reason); },
                caf::after(std::chrono::seconds(20)) >> [&] { reason = "timeout"; });
  CHECK(reason.find("stage 1") != std::string::npos);
  CHECK(reason.find("micro-batch 6") != std::string::npos);
}
