// The messages that cross processes survive CAF's binary serializer field for field; a
// WeightsReply carries metadata only and arrives as PendingPayload placeholders tagged
// for the transport.
#include <doctest/doctest.h>

#include <caf/all.hpp>

#include "actors/messages/messages.hpp"

using namespace conveyor;

namespace {

template <class T>
T round_trip(caf::actor_system& system, const T& x) {
  std::vector<char> buf;
  caf::binary_serializer sink{system, buf};
  T copy = x;
  REQUIRE_FALSE(sink(copy));
  T out;
  caf::binary_deserializer source{system, buf};
  REQUIRE_FALSE(source(out));
  return out;
}

}  // namespace

TEST_CASE("plans, headers, reports and optimizer messages cross the wire unchanged, trace ids too") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", 1);
  add_wire_types(cfg);
  caf::actor_system system{cfg};

  const auto plan = round_trip(
      system, StepPlan{3, 2, Phase::eval,
                       std::make_shared<const std::vector<sched::Action>>(std::vector<sched::Action>{
                           sched::Action::parse("1F3"), sched::Action::parse("0I2"),
                           sched::Action::parse("0F3c1")}),
                       11});
  CHECK(plan.round == 3);
  CHECK(plan.trace_id == 11);
  CHECK(plan.step == 2);
  CHECK(plan.phase == Phase::eval);
  REQUIRE(plan.actions);
  REQUIRE(plan.actions->size() == 3);
  CHECK((*plan.actions)[1] == sched::Action::parse("0I2"));
  CHECK((*plan.actions)[2].chunk == 1);

  const auto header = round_trip(
      system, PipeHeader{PipeKind::gradient, 5, 4, Phase::train, 7, 2, 1, {2, 16, 32}, DType::bf16,
                         0x0003000000000011ull});
  CHECK(header.kind == PipeKind::gradient);
  CHECK(header.round == 5);
  CHECK(header.micro_batch == 7);
  CHECK(header.from_model_stage == 2);
  CHECK(header.to_model_stage == 1);
  CHECK(header.shape == std::vector<std::int64_t>{2, 16, 32});
  CHECK(header.dtype == DType::bf16);
  CHECK(header.trace_id == 0x0003000000000011ull);  // the flow of a trace crosses processes

  StageReport report;
  report.rank = 1;
  report.step = 9;
  report.phase = Phase::train;
  report.losses = {{0, 1.5}, {1, 2.25}};
  report.grad_squares = {ModelStageGradSquares{1, {0.5, 0.25}}};
  report.timings = {ActionTiming{sched::Action::parse("1B0"), 10, 20}};
  report.trace_id = 12;
  const auto r = round_trip(system, report);
  CHECK(r.rank == 1);
  CHECK(r.trace_id == 12);
  CHECK(r.losses == report.losses);
  REQUIRE(r.grad_squares.size() == 1);
  CHECK(r.grad_squares[0].squares == std::vector<double>{0.5, 0.25});
  REQUIRE(r.timings.size() == 1);
  CHECK(r.timings[0].action == sched::Action::parse("1B0"));
  CHECK(r.timings[0].end_ns == 20);

  const auto step = round_trip(system, OptimizerStep{4, 1e-3, 0.5f, 13, true});
  CHECK(step.lr == doctest::Approx(1e-3));
  CHECK(step.grad_scale == 0.5f);
  CHECK(step.trace_id == 13);
  CHECK(step.skip);
  const auto done = round_trip(system, OptimizerDone{1, 4, 2.5, 14});
  CHECK(done.step == 4);
  CHECK(done.allgather_ms == 2.5);
  CHECK(done.trace_id == 14);
}

TEST_CASE("a WeightsReply crosses as names, shapes and dtypes with its bytes left to the transport, tagged by stage actor") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", 1);
  add_wire_types(cfg);
  caf::actor_system system{cfg};
  Tensor w = Tensor::zeros({3, 4});
  w.f32()[0] = 42.0f;
  WeightsReply reply{2, {ModelStageWeights{3, {NamedTensor{"blocks.3.ln.weight", w},
                                               NamedTensor{"blocks.3.ln.bias", Tensor::zeros({4})}}},
                                ModelStageWeights{7, {NamedTensor{"blocks.7.ln.bias", Tensor::zeros({4})}}}}};
  const auto got = round_trip(system, reply);
  CHECK(got.rank == 2);
  REQUIRE(got.model_stages.size() == 2);
  const auto& m = got.model_stages[0];
  CHECK(m.model_stage == 3);
  REQUIRE(m.tensors.size() == 2);
  CHECK(m.tensors[0].name == "blocks.3.ln.weight");
  CHECK(m.tensors[0].tensor.shape() == Shape{3, 4});
  const PendingPayload* p = pending_payload(m.tensors[1].tensor);
  REQUIRE(p != nullptr);
  CHECK(p->tag() == weight_tag(2, 1));  // stage actor 2's second tensor
  // Tags count the reply's tensors across its model stages: unique per stage actor, so
  // the same model stage of two replicas never shares one.
  const PendingPayload* third = pending_payload(got.model_stages[1].tensors.at(0).tensor);
  REQUIRE(third != nullptr);
  CHECK(third->tag() == weight_tag(2, 2));
  CHECK(pending_payload(w) == nullptr);
}

TEST_CASE("recovery messages cross the wire, a snapshot copy's tensors arrive as placeholders tagged per rank, step and index") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", 1);
  add_wire_types(cfg);
  caf::actor_system system{cfg};
  const auto restore = round_trip(system, RestoreStage{12, 31});
  CHECK(restore.steps_done == 12);
  CHECK(restore.round_fence == 31);
  const auto restored = round_trip(system, StageRestored{3, 12});
  CHECK(restored.rank == 3);
  CHECK(restored.steps_done == 12);
  const auto respawn = round_trip(system, RespawnStage{2, 40});
  CHECK(respawn.rank == 2);
  CHECK(respawn.round_fence == 40);
  CHECK(round_trip(system, CopySnapshot{25}).steps_done == 25);  // fault.buddy_copies off
  const auto rejoined = round_trip(system, PeerRejoined{1, {7, 8, 9}});
  CHECK(rejoined.node == 1);
  CHECK(rejoined.ucx_address == std::vector<std::uint8_t>{7, 8, 9});
  // The stage groups' recovery (replicas over processes).
  CHECK(round_trip(system, AbortRound{17}).round_fence == 17);
  CHECK(round_trip(system, RoundAborted{5}).rank == 5);
  CHECK(round_trip(system, JoinReplicaGroup{9}).generation == 9);
  CHECK(round_trip(system, ReplicaGroupJoined{6}).rank == 6);
  const auto group_failed = round_trip(system, ReplicaGroupFailed{3, 21, "bucket 2 timed out"});
  CHECK(group_failed.rank == 3);
  CHECK(group_failed.round == 21);
  CHECK(group_failed.what == "bucket 2 timed out");

  Tensor m = Tensor::zeros({5, 2});
  m.f32()[3] = 1.5f;
  SnapshotCopy copy{2, 12, 12, {NamedTensor{"blocks.2.attn.qkv.weight", m},
                                NamedTensor{"opt.m.blocks.2.attn.qkv.weight", Tensor::zeros({7})}}};
  copy.round = 30;  // the sender's round: its tags' (edge_tags.hpp)
  const auto got = round_trip(system, RestoreFromCopy{31, copy});
  CHECK(got.round_fence == 31);
  CHECK(got.copy.rank == 2);
  CHECK(got.copy.steps_done == 12);
  CHECK(got.copy.optimizer_steps == 12);
  CHECK(got.copy.round == 30);
  REQUIRE(got.copy.tensors.size() == 2);
  CHECK(got.copy.tensors[1].name == "opt.m.blocks.2.attn.qkv.weight");
  CHECK(got.copy.tensors[0].tensor.shape() == Shape{5, 2});
  for (int i = 0; i < 2; ++i) {
    const PendingPayload* p = pending_payload(got.copy.tensors[i].tensor);
    REQUIRE(p != nullptr);
    CHECK(p->tag() == snapshot_tag(2, 30, 12, i));
    CHECK(p->tag() != weight_tag(2, i));  // never mistaken for the final weights
  }
  // A restore the keeper numbered: its tensors are awaited under that restore's tags.
  copy.series = 7;
  const auto numbered = round_trip(system, RestoreFromCopy{32, copy});
  CHECK(numbered.copy.series == 7);
  for (int i = 0; i < 2; ++i) {
    const PendingPayload* p = pending_payload(numbered.copy.tensors[i].tensor);
    REQUIRE(p != nullptr);
    CHECK(p->tag() == restore_tag(2, 7, i));
  }
}

TEST_CASE("a snapshot copy whose lists disagree or name an unknown dtype is refused, not built") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", 1);
  add_wire_types(cfg);
  caf::actor_system system{cfg};
  // Fields as SnapshotCopy writes them, with one dtype too few, then one unknown dtype.
  for (const std::vector<std::uint8_t>& dtypes : {std::vector<std::uint8_t>{0},
                                                  std::vector<std::uint8_t>{0, 9}}) {
    std::vector<char> buf;
    caf::binary_serializer sink{system, buf};
    int rank = 1;
    std::int64_t steps = 3, optimizer_steps = 3;
    std::vector<std::string> names{"a", "b"};
    std::vector<std::vector<std::int64_t>> shapes{{2}, {3}};
    auto d = dtypes;
    REQUIRE_FALSE(sink(rank, steps, optimizer_steps, names, shapes, d));
    SnapshotCopy out;
    caf::binary_deserializer source{system, buf};
    CHECK(source(out));  // an error
  }
}
