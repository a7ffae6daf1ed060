// A stage actor's edges over a channel: a header is checked before its receive is posted,
// and a payload that never comes fails the stage after transport.timeout_s with a reason
// naming the edge, the step and the micro-batch. Real UCX (loopback to this process).
#include <doctest/doctest.h>

#include <caf/all.hpp>

#include "actors/messages/error_text.hpp"
#include "actors/stage/stage_actor.hpp"
#include "tests/actors/support/tiny_job.hpp"
#include "transport/ucx/ucx_channel.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

// Rank 1 of a 2-stage tiny job whose edges all go through a UCX loopback channel.
std::string failure_of_stage_1(const PipeHeader& header) {
  auto job = std::make_shared<const Job>(tiny_job(TinyJobOptions{}));
  UcxOptions o;
  o.transports = "tcp,self,sm";
  o.timeout = std::chrono::milliseconds(300);
  o.name = "node 0";
  auto hub = std::make_shared<UcxHub>(o);
  hub->connect(0, hub->address(), "node 0");
  auto links = std::make_shared<StageLinks>();
  links->node_of_rank = {0, 0};
  links->through_channels = true;
  links->timeout = std::chrono::milliseconds(300);
  links->channels[0] = std::make_shared<UcxChannel>(hub, 0, "node 0");

  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", 2);
  caf::actor_system system{cfg};
  auto stage = system.spawn<caf::detached>(stage_actor, job, 1, StageWorker::Clock::now(),
                                           std::shared_ptr<const StageLinks>(links),
                                           /*join_group=*/true);
  caf::scoped_actor self{system};
  self->monitor(stage);
  self->send(stage, PeerTable{{stage, stage}});
  self->send(stage, StepPlan{1, 0, Phase::train,
                             std::make_shared<const std::vector<sched::Action>>(
                                 job->plan.schedule.ranks[1])});
  self->send(stage, header);
  std::string reason;
  self->receive([&](caf::down_msg& down) { reason = error_text(system, down.reason); },
                caf::after(std::chrono::seconds(20)) >> [&] { reason = "no failure"; });
  return reason;
}

}  // namespace

TEST_CASE("a payload that never arrives fails the stage naming the edge, step and micro-batch") {
  const auto reason =
      failure_of_stage_1(PipeHeader{PipeKind::activation, 1, 0, Phase::train, 2, 0, 1, {2, 16, 32}, DType::f32});
  INFO(reason);
  CHECK(reason.find("stage 1") != std::string::npos);
  CHECK(reason.find("activation for train step 0 micro-batch 2 from model stage 0") !=
        std::string::npos);
  CHECK(reason.find("(edge 0) over ucx to node 0 did not arrive") != std::string::npos);
  CHECK(reason.find("did not complete within 300 ms") != std::string::npos);
}

TEST_CASE("a header with the wrong shape fails the stage before anything is received") {
  const auto reason =
      failure_of_stage_1(PipeHeader{PipeKind::activation, 1, 0, Phase::train, 2, 0, 1, {2, 16, 33}, DType::f32});
  INFO(reason);
  CHECK(reason.find("expected f32 (2, 16, 32), got f32 (2, 16, 33)") != std::string::npos);
}
