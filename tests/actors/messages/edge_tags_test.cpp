// Tags of the tensors that cross processes are unique among the messages in flight into
// one process: the same edge, round and micro-batch of two data-parallel replicas (each
// numbers its micro-batches from 0), and the final weights of two stage actors that hold
// the same model stage, never share a tag.
#include "actors/messages/edge_tags.hpp"
#include "actors/messages/recovery_messages.hpp"

#include <doctest/doctest.h>

#include <set>

using namespace conveyor;

TEST_CASE("replicas' activations and gradients on the same edge get different tags") {
  const int model_stages = 4;
  std::set<std::uint64_t> seen;
  for (int replica = 0; replica < 3; ++replica)
    for (int boundary = 0; boundary + 1 < model_stages; ++boundary)
      for (bool activation : {true, false}) {
        const int from = activation ? boundary : boundary + 1;
        const int to = activation ? boundary + 1 : boundary;
        CHECK(seen.insert(pipe_tag(activation, 7, 2, from, to, replica, model_stages)).second);
      }
  // Replica 0 keeps the tags of a run without replicas.
  CHECK(pipe_tag(true, 7, 2, 1, 2, 0, model_stages) == pipe_tag(true, 7, 2, 1, 2));
  CHECK(unpack_tag(pipe_tag(false, 7, 2, 2, 1, 2, model_stages)).edge == 2 * model_stages + 1);
}

TEST_CASE("the final weights are tagged by stage actor, apart from snapshot copies") {
  CHECK(weight_tag(0, 3) != weight_tag(2, 3));  // stage 0 of replicas 0 and 1 (P = 2)
  CHECK(unpack_tag(weight_tag(5, 9)).edge == 5);
  CHECK(unpack_tag(weight_tag(5, 9)).micro_batch == 9);
  for (std::int64_t round = 0; round < 4; ++round)
    for (std::int64_t steps : {std::int64_t{0}, std::int64_t{65534}, std::int64_t{65535}})
      CHECK(snapshot_tag(5, round, steps, 9) != weight_tag(5, 9));
  CHECK(unpack_tag(snapshot_tag(5, 0x10000, 65535 * 2, 9)).step != 0);  // both parts wrapped
}

TEST_CASE("restores are numbered apart from snapshot copies and from one another") {
  // Two restores of rank 5 from step 8 (a move abandoned, then the next): other tags.
  CHECK(restore_tag(5, 1, 9) != restore_tag(5, 2, 9));
  for (std::uint32_t series : {1u, 9u}) {
    CHECK(restore_tag(5, series, 9) != snapshot_tag(5, 8, 8, 9));
    CHECK(restore_tag(5, series, 9) != weight_tag(5, 9));
  }
  CHECK(unpack_tag(restore_tag(5, 3, 9)).kind == TagKind::restore);
  CHECK(unpack_tag(restore_tag(5, 3, 9)).edge == 5);
  CHECK(copy_tag(SnapshotCopy{5, 8, 8, {}, 0, 20}, 9) == snapshot_tag(5, 20, 8, 9));
  CHECK(copy_tag(SnapshotCopy{5, 8, 8, {}, 4}, 9) == restore_tag(5, 4, 9));
}

TEST_CASE("a step's snapshot copied again in a later round (a replay after a recovery) has other tags") {
  // Step 8's copy by rank 5 broke off in round 20 (its node lost): node 0's receives for
  // it may still be posted. The replay of step 8, by whichever node runs rank 5 now, is in
  // a later round: none of its tensors can be matched to those receives.
  const SnapshotCopy first{5, 8, 8, {}, 0, 20};
  const SnapshotCopy replayed{5, 8, 8, {}, 0, 23};
  for (int i = 0; i < 40; ++i) CHECK(copy_tag(first, i) != copy_tag(replayed, i));
  CHECK(unpack_tag(copy_tag(replayed, 3)).step == (23 << 16 | 9));
  // Two copies of other steps sent in one round (a checkpoint's and a grow's asks).
  const SnapshotCopy older{5, 6, 6, {}, 0, 23};
  for (int i = 0; i < 40; ++i) CHECK(copy_tag(older, i) != copy_tag(replayed, i));
}
