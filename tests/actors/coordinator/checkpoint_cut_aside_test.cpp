// The checkpoint read of a shrink without buddy copies, off the coordinator's thread
// (actors/coordinator/checkpoint_cut_aside.hpp): an actor that has a checkpoint read and cut
// aside still answers other messages while the read is held up on the disk (here a
// filesystem that blocks until the test lets it go), and then receives, on its own
// thread, exactly what reshard_checkpoint gives for the same checkpoint; a checkpoint that
// cannot be cut comes back as the failure, naming it, and the asker goes on.
#include <doctest/doctest.h>

#include <caf/all.hpp>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "actors/checkpoint/checkpoint_writer.hpp"
#include "actors/checkpoint/forwarding_filesystem.hpp"
#include "actors/coordinator/checkpoint_cut_aside.hpp"
#include "actors/plan/pipeline_layout.hpp"
#include "kernels/model/stage_model.hpp"
#include "tests/actors/checkpoint/checkpoint_test_support.hpp"
#include "tests/actors/fault/small_gpt.hpp"

using namespace conveyor;
using conveyor::fault_test::plan_of;

namespace {

using ping_atom = caf::atom_constant<caf::atom("ping")>;

// A checkpoint of `stages` CPU stages of plan `three` after 8 steps (7 AdamW steps), of
// which the first `shards` are written.
std::string write_checkpoint_of(const testing::ScratchDir& dir, const JobPlan& three, std::size_t shards) {
  checkpoint::Snapshot snap;
  snap.manifest.step = 8;
  snap.manifest.optimizer_steps = 7;
  snap.manifest.seed = 1234;
  snap.manifest.schedule = "1f1b";
  snap.manifest.stages = static_cast<int>(three.placement.ranks.size());
  snap.manifest.partition_halves.assign(three.placement.ranks.size(), 2);
  for (std::size_t k = 0; k < shards; ++k) {
    auto model = make_cpu_stage_model(three.model, three.placement.ranks[k].chunks.at(0).slice, 1234);
    checkpoint::StageShard shard;
    shard.stage = static_cast<int>(k);
    shard.tensors = model->capture_state();
    snap.shards.push_back(std::move(shard));
  }
  return checkpoint::write_checkpoint(checkpoint::posix_filesystem(), dir.path(), snap, 3).path;
}

// The disk held up: every call waits until release() (and says it began waiting).
class HeldFilesystem final : public checkpoint::ForwardingFilesystem {
 public:
  HeldFilesystem() : ForwardingFilesystem(checkpoint::posix_filesystem()) {}
  bool exists(const std::string& path) override {
    std::unique_lock lock(mutex_);
    waiting_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return released_; });
    lock.unlock();
    return inner_.exists(path);
  }
  bool wait_until_reading(std::chrono::seconds limit) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, limit, [&] { return waiting_; });
  }
  void release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool waiting_ = false, released_ = false;
};

// What the asker receives: the cut, or why not.
struct Outcome {
  std::optional<CheckpointCut> cut;
  std::string failed;
  std::thread::id on;  // the thread it ran on
};

// Asks for the cut as it starts; answers pings meanwhile (with its thread's id).
caf::behavior asker(caf::event_based_actor* self, checkpoint::Filesystem* fs, std::string path,
                    std::shared_ptr<const JobPlan> to, std::shared_ptr<std::promise<Outcome>> outcome) {
  cut_checkpoint_aside(
      self, *fs, path, std::move(to),
      [outcome](CheckpointCut& cut) { outcome->set_value(Outcome{std::move(cut), "", std::this_thread::get_id()}); },
      [outcome](const std::string& why) { outcome->set_value(Outcome{std::nullopt, why, std::this_thread::get_id()}); });
  return {[](ping_atom) { return true; }};
}

caf::actor_system_config& two_workers(caf::actor_system_config& cfg) {
  cfg.set("scheduler.max-threads", 2);
  return cfg;
}

}  // namespace

TEST_CASE("an actor whose checkpoint is read and cut aside answers while the read is held up, then receives reshard_checkpoint's cut") {
  const JobPlan three = plan_of({2, 2, 2});
  const JobPlan two = plan_of({3, 3});
  testing::ScratchDir dir("checkpoint_cut_aside");
  const auto path = write_checkpoint_of(dir, three, 3);
  const auto want = reshard_checkpoint(checkpoint::posix_filesystem(), path, two);

  HeldFilesystem disk;
  caf::actor_system_config cfg;
  caf::actor_system system{two_workers(cfg)};
  auto outcome = std::make_shared<std::promise<Outcome>>();
  auto got = outcome->get_future();
  auto a = system.spawn(asker, &disk, path, std::make_shared<const JobPlan>(two), outcome);
  REQUIRE(disk.wait_until_reading(std::chrono::seconds(10)));

  // The read is held: the asker still answers.
  caf::scoped_actor me{system};
  bool answered = false;
  me->request(a, std::chrono::seconds(5), ping_atom::value)
      .receive([&](bool) { answered = true; }, [&](caf::error&) {});
  CHECK(answered);
  CHECK(got.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout);

  disk.release();
  REQUIRE(got.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  const auto o = got.get();
  CHECK(o.failed.empty());
  REQUIRE(o.cut);
  CHECK(o.cut->steps_done == 8);
  REQUIRE(o.cut->states.size() == want.states.size());
  for (std::size_t r = 0; r < want.states.size(); ++r) {
    INFO("new stage " << r);
    CHECK(o.cut->states[r].optimizer_steps() == 7);
    const auto x = o.cut->states[r].tensors();
    const auto y = want.states[r].tensors();
    REQUIRE(x.size() == y.size());
    for (std::size_t t = 0; t < x.size(); ++t) {
      INFO(y[t].name);
      CHECK(x[t].name == y[t].name);
      REQUIRE(x[t].tensor.bytes() == y[t].tensor.bytes());
      CHECK(std::memcmp(x[t].tensor.raw(), y[t].tensor.raw(), x[t].tensor.bytes()) == 0);
    }
  }
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE("a checkpoint that cannot be cut aside comes back as the failure, naming it, and the asker goes on") {
  const JobPlan three = plan_of({2, 2, 2});
  testing::ScratchDir dir("checkpoint_cut_aside_missing");
  const auto path = write_checkpoint_of(dir, three, 2);  // stage 2's shard left out

  caf::actor_system_config cfg;
  caf::actor_system system{two_workers(cfg)};
  auto outcome = std::make_shared<std::promise<Outcome>>();
  auto got = outcome->get_future();
  auto a = system.spawn(asker, &checkpoint::posix_filesystem(), path, std::make_shared<const JobPlan>(plan_of({3, 3})),
                        outcome);
  REQUIRE(got.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  const auto o = got.get();
  CHECK_FALSE(o.cut);
  CHECK(o.failed.find(path) != std::string::npos);
  CHECK(o.failed.find("missing") != std::string::npos);
  caf::scoped_actor me{system};
  bool answered = false;
  me->request(a, std::chrono::seconds(5), ping_atom::value)
      .receive([&](bool) { answered = true; }, [&](caf::error&) {});
  CHECK(answered);
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}
