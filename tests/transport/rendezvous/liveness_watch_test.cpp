#include "transport/rendezvous/liveness_watch.hpp"

#include <doctest/doctest.h>

#include <future>
#include <mutex>
#include <thread>
#include <memory>
#include <optional>

#include "test_server.hpp"

namespace conveyor {
namespace {

using namespace std::chrono;
using testing::client_options;
using testing::LogCapture;
using testing::server_options;

// The first loss a watch reports, waited for with a bound.
struct LossProbe {
  std::promise<LivenessLoss> promise;
  std::future<LivenessLoss> future = promise.get_future();
  LivenessWatch::OnLoss sink() {
    return [this](const LivenessLoss& l) { promise.set_value(l); };
  }
  std::optional<LivenessLoss> within(milliseconds bound) {
    if (future.wait_for(bound) != std::future_status::ready) return std::nullopt;
    return future.get();
  }
};

LivenessOptions watch_options(const RendezvousServer& server, std::uint32_t rank) {
  LivenessOptions o;
  o.store = client_options(server);
  o.store.connect_timeout = milliseconds(300);
  o.rank = rank;
  o.world_size = 2;
  o.interval = milliseconds(20);
  o.max_silence = milliseconds(400);
  return o;
}

// Both ranks joined through their main clients, as a job does before it watches.
void join_both(const RendezvousServer& server, std::vector<std::unique_ptr<RendezvousClient>>& c) {
  for (int r = 0; r < 2; ++r) c.push_back(std::make_unique<RendezvousClient>(client_options(server)));
  auto other = std::async(std::launch::async, [&] { c[1]->join(1, 2, seconds(5)); });
  c[0]->join(0, 2, seconds(5));
  other.get();
}

TEST_CASE("two live ranks watching each other report nothing") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  std::vector<std::unique_ptr<RendezvousClient>> clients;
  join_both(server, clients);
  LossProbe p0, p1;
  {
    LivenessWatch w0(watch_options(server, 0), p0.sink());
    LivenessWatch w1(watch_options(server, 1), p1.sink());
    // Three silence windows: a missed heartbeat would have been reported by now.
    CHECK_FALSE(p0.within(milliseconds(1200)).has_value());
  }
  CHECK_FALSE(p1.within(milliseconds(0)).has_value());
}

TEST_CASE("a rank that stops heartbeating is reported by name within the silence bound") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  std::vector<std::unique_ptr<RendezvousClient>> clients;
  join_both(server, clients);
  LossProbe p0, p1;
  LivenessWatch w0(watch_options(server, 0), p0.sink());
  auto w1 = std::make_unique<LivenessWatch>(watch_options(server, 1), p1.sink());
  std::this_thread::sleep_for(milliseconds(100));
  const auto killed = steady_clock::now();
  w1.reset();  // as when rank 1's process dies: its heartbeats stop
  auto loss = p0.within(seconds(5));
  REQUIRE(loss.has_value());
  const auto after = steady_clock::now() - killed;
  CHECK(loss->silent_ranks == std::vector<std::uint32_t>{1});
  CHECK(loss->detail.find("rank 1 silent") != std::string::npos);
  CHECK(after >= milliseconds(300));  // not before its silence could have been noticed
  CHECK(after < milliseconds(2000));
}

TEST_CASE("the store going away (node 0 died) is a loss naming the store") {
  LogCapture log;
  auto server = std::make_unique<RendezvousServer>(server_options(log));
  std::vector<std::unique_ptr<RendezvousClient>> clients;
  join_both(*server, clients);
  LossProbe p1;
  LivenessWatch w1(watch_options(*server, 1), p1.sink());
  std::this_thread::sleep_for(milliseconds(100));
  server.reset();
  auto loss = p1.within(seconds(5));
  REQUIRE(loss.has_value());
  CHECK(loss->silent_ranks.empty());
  CHECK(loss->detail.find("rendezvous: ") == 0);
}

TEST_CASE("a watch stopped before its peers leave reports nothing") {
  LogCapture log;
  auto server = std::make_unique<RendezvousServer>(server_options(log));
  std::vector<std::unique_ptr<RendezvousClient>> clients;
  join_both(*server, clients);
  LossProbe p1;
  LivenessWatch w1(watch_options(*server, 1), p1.sink());
  std::this_thread::sleep_for(milliseconds(60));
  w1.stop();  // the job ended normally
  server.reset();
  CHECK_FALSE(p1.within(milliseconds(800)).has_value());
}

TEST_CASE("keep_watching reports a lost rank once, and again only after its replacement joined and went silent too") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  std::vector<std::unique_ptr<RendezvousClient>> clients;
  join_both(server, clients);
  std::mutex mutex;
  std::vector<LivenessLoss> losses;
  auto options = watch_options(server, 0);
  options.keep_watching = true;
  LivenessWatch w0(options, [&](const LivenessLoss& l) {
    std::lock_guard lock(mutex);
    losses.push_back(l);
  });
  auto count = [&] {
    std::lock_guard lock(mutex);
    return losses.size();
  };
  auto wait_for = [&](std::size_t n) {
    for (int i = 0; i < 250 && count() < n; ++i) std::this_thread::sleep_for(milliseconds(20));
    return count();
  };
  auto w1 = std::make_unique<LivenessWatch>(watch_options(server, 1), [](const LivenessLoss&) {});
  std::this_thread::sleep_for(milliseconds(100));
  w1.reset();  // rank 1 dies
  REQUIRE(wait_for(1) == 1);
  std::this_thread::sleep_for(milliseconds(600));  // still silent: not reported again
  CHECK(count() == 1);
  // Its replacement joins with the same rank (a LivenessWatch joins and heartbeats), runs
  // a while, and dies too: a second report.
  w1 = std::make_unique<LivenessWatch>(watch_options(server, 1), [](const LivenessLoss&) {});
  std::this_thread::sleep_for(milliseconds(300));
  w1.reset();
  REQUIRE(wait_for(2) == 2);
  std::lock_guard lock(mutex);
  CHECK(losses[0].silent_ranks == std::vector<std::uint32_t>{1});
  CHECK(losses[1].silent_ranks == std::vector<std::uint32_t>{1});
}

}  // namespace
}  // namespace conveyor
