// A supervised node started again while the old job still runs, in a job that takes no
// replacements, waits for that job to end before its attempt ends (job_end_wait.hpp):
// against a real rendezvous store on loopback, whose host (node 0) goes away, or not.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "actors/cluster/node_setup.hpp"
#include "apps/train/job_end_wait.hpp"
#include "apps/train/node_replacement.hpp"
#include "tests/transport/rendezvous/test_server.hpp"

using namespace conveyor;
using namespace std::chrono_literals;

namespace {

std::string wait_error(RendezvousClient& client, std::chrono::milliseconds limit) {
  try {
    await_job_end(client, 1, limit);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "<returned>";
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

TEST_CASE("a node that cannot rejoin waits until node 0's store is gone, then ends its attempt saying so") {
  testing::LogCapture log;
  auto server = std::make_unique<RendezvousServer>(testing::server_options(log));
  auto options = testing::client_options(*server);
  options.connect_timeout = 300ms;  // a store that is gone is not waited for long
  RendezvousClient client(options);
  client.set(kJobRunningKey, "1");
  std::thread node0_ends([&] {
    std::this_thread::sleep_for(600ms);
    server.reset();
  });
  const auto start = std::chrono::steady_clock::now();
  const std::string why = wait_error(client, 20s);
  const double waited = seconds_since(start);
  node0_ends.join();
  INFO(why);
  CHECK(waited >= 0.55);  // it waited for the store to go
  CHECK(waited < 10);
  CHECK(why.find("node 1 was started again while the job still ran") != std::string::npos);
  CHECK(why.find("the job ended after") != std::string::npos);
  CHECK(why.find("fault.buddy_copies") != std::string::npos);
}

TEST_CASE("a node that cannot rejoin stops waiting at its limit when the job goes on") {
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  RendezvousClient client(testing::client_options(server));
  client.set(kJobRunningKey, "1");
  const auto start = std::chrono::steady_clock::now();
  const std::string why = wait_error(client, 700ms);
  CHECK(seconds_since(start) >= 0.65);
  CHECK(why.find("the job did not end after") != std::string::npos);
}

TEST_CASE("a job takes replacements with buddy copies or checkpoints of CPU stages, restarts and a rejoin wait only") {
  RunConfig c;
  CHECK(takes_replacements(c));  // the defaults: CPU stages, auto, restart, 300 s
  c.fault.buddy_copies = BuddyCopies::off;
  CHECK_FALSE(takes_replacements(c));  // and no checkpoints to go back to
  c.checkpoint.every = 5;
  CHECK(takes_replacements(c));  // every stage goes back to the newest checkpoint
  c.optim.shard_state = true;
  c.parallel.data = 2;
  CHECK(takes_replacements(c));  // each replica restores its part of the merged state
  c.devices.kind = DeviceKind::cuda;
  CHECK_FALSE(takes_replacements(c));  // GPU stages do not rejoin without copies yet
  c.devices.kind = DeviceKind::cpu;
  c.optim.shard_state = false;
  c.parallel.data = 1;
  c.checkpoint.every = 0;
  c.fault.buddy_copies = BuddyCopies::automatic;
  c.devices.kind = DeviceKind::cuda;
  CHECK_FALSE(takes_replacements(c));
  c.devices.kind = DeviceKind::cpu;
  c.fault.rejoin_timeout_s = 0;
  CHECK_FALSE(takes_replacements(c));
  c.fault.rejoin_timeout_s = 300;
  c.fault.policy = FaultPolicy::abort;
  CHECK_FALSE(takes_replacements(c));
  c.fault.policy = FaultPolicy::restart;
  c.fault.snapshot_every = 0;
  CHECK_FALSE(takes_replacements(c));
}
