// A snapshot keeper on node 1, the standby of issue 44 item 7 (snapshot_keeper.hpp): it
// keeps the copies of node 0's ranks, their bytes over the channel from node 0, as node
// 0's keeper keeps the other nodes', and drops a copy of a rank of its own node. Real UCX
// on loopback: this process plays node 0's end of the channel too.
#include <doctest/doctest.h>

#include <caf/all.hpp>

#include <chrono>
#include <thread>

#include "actors/cluster/snapshot_keeper.hpp"
#include "actors/messages/edge_tags.hpp"
#include "actors/messages/payload_transfer.hpp"
#include "actors/messages/pending_payload.hpp"
#include "transport/ucx/ucx_channel.hpp"

using namespace conveyor;
using namespace std::chrono_literals;

namespace {

Tensor counting(float first) {
  Tensor t = Tensor::zeros(Shape{4});
  for (auto& x : t.f32_span()) x = first++;
  return t;
}

// A copy as it comes out of CAF from another process: names and shapes, the bytes pending
// under their snapshot tags.
SnapshotCopy as_received(int rank, std::int64_t round, std::int64_t steps_done) {
  auto pending = std::make_shared<PendingPayload>(4 * sizeof(float), snapshot_tag(rank, round, steps_done, 0));
  return SnapshotCopy{rank, steps_done, steps_done, {{"w", Tensor::wrap(pending, Shape{4}, DType::f32)}}, 0, round};
}

}  // namespace

TEST_CASE("a keeper on node 1 keeps the copies of node 0's ranks, and drops one of its own node's rank") {
  UcxOptions o;
  o.transports = "tcp,self,sm";
  o.timeout = 5s;
  o.name = "node 1";
  auto hub = std::make_shared<UcxHub>(o);
  hub->connect(0, hub->address(), "node 0");
  auto links = std::make_shared<StageLinks>();
  links->node = 1;
  links->node_of_rank = {0, 0, 1};  // node 0 runs ranks 0 and 1, node 1 rank 2
  links->timeout = 5s;
  links->channels[0] = std::make_shared<UcxChannel>(hub, 0, "node 0");
  auto store = std::make_shared<SnapshotStore>(3, 4);
  auto in_flight = std::make_shared<CopiesInFlight>();

  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  auto keeper = system.spawn(snapshot_keeper, store, std::make_shared<const CurrentLinks>(links), nullptr, in_flight);
  caf::scoped_actor self{system};

  // Node 0's stage 1 after step 3, in round 5: the bytes on the channel, the names by CAF.
  send_payloads(links->channel_to(0), {{"w", counting(1.0f)}}, [](int i) { return snapshot_tag(1, 5, 3, i); }, 5s,
                "node 0's stage 1's copy");
  self->send(keeper, as_received(1, 5, 3));
  // A copy of rank 2, node 1's own, with its tensors: not a stage of another node.
  self->send(keeper, SnapshotCopy{2, 3, 3, {{"w", counting(9.0f)}}, 0, 5});
  // Answered after both copies were taken in (one sender: in order).
  bool noted = true;
  self->request(keeper, caf::infinite, ShardWritten{2, "token", {}, {}, 0, {}, {}})
      .receive([&](bool ok) { noted = ok; }, [&](caf::error& e) { FAIL(system.render(e)); });
  CHECK_FALSE(noted);  // node 1 keeps no book of shards

  CHECK(in_flight->wait_idle(10s));
  const auto kept = store->get(1, 3);
  REQUIRE(kept);
  CHECK(kept->optimizer_steps() == 3);
  const auto tensors = kept->tensors();
  REQUIRE(tensors.size() == 1);
  CHECK(tensors[0].name == "w");
  const auto values = tensors[0].tensor.f32_span();
  CHECK(std::vector<float>(values.begin(), values.end()) == std::vector<float>{1, 2, 3, 4});
  CHECK_FALSE(store->get(2, 3));
  CHECK(store->consistent_step({1}) == 3);
  CHECK_FALSE(store->consistent_step({0, 1}));  // rank 0's copy never came
  caf::anon_send_exit(keeper, caf::exit_reason::user_shutdown);
}
