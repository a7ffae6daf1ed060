// rendezvous.peer_silence_s: how long a node of a multi-process job may go without a
// heartbeat before it is lost. It was fixed at 5 s in code; now a key with 5 s as its
// default, refused (exit 2, naming the key and the value) where it cannot work: shorter
// than a few heartbeats, which would declare healthy nodes lost, or past the deadlines'
// week.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "actors/cluster/node_setup.hpp"
#include "apps/config/config_keys.hpp"
#include "apps/config/config_limits.hpp"
#include "apps/config/config_loader.hpp"
#include "kernels/common/error.hpp"
#include "tests/apps/support/run_command.hpp"
#include "tests/support/temp_dir.hpp"

using namespace conveyor;
using conveyor::testing::run_command;
using conveyor::testing::TempDir;

namespace {

std::string error_of(const std::vector<std::string>& sets) {
  try {
    load_run_config("", sets);
  } catch (const InputError& e) {
    return e.what();
  }
  return "<accepted>";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("rendezvous.peer_silence_s is 5 s unless set, and takes a value of a second or more") {
  CHECK(load_run_config("", {}).rendezvous.peer_silence_s == 5.0);
  CHECK(load_run_config("", {"rendezvous.peer_silence_s=1.5"}).rendezvous.peer_silence_s == 1.5);
  CHECK(load_run_config("", {"rendezvous.peer_silence_s=1"}).rendezvous.peer_silence_s == 1.0);
  CHECK(load_run_config("", {"rendezvous.peer_silence_s=120"}).rendezvous.peer_silence_s == 120.0);
}

TEST_CASE("a peer silence that cannot work is refused naming rendezvous.peer_silence_s and the value") {
  for (const std::string v : {"0", "-2", "0.5", "0.999"}) {
    CAPTURE(v);
    const std::string e = error_of({"rendezvous.peer_silence_s=" + v});
    CHECK(has(e, "rendezvous.peer_silence_s: must be >= 1, got " + v));
    // Why a second: nodes heartbeat every 250 ms, and a shorter silence loses healthy ones.
    CHECK(has(e, "every 250 ms"));
    CHECK(has(e, "healthy nodes"));
  }
  CHECK(has(error_of({"rendezvous.peer_silence_s=nan"}),
            "rendezvous.peer_silence_s: expected a finite number, got 'nan'"));
  CHECK(has(error_of({"rendezvous.peer_silence_s=1e300"}),
            "rendezvous.peer_silence_s: must be <= 604800, got 1e+300"));
  CHECK(has(error_of({"rendezvous.peer_silence_s=five"}),
            "rendezvous.peer_silence_s: expected a number, got 'five'"));
}

TEST_CASE("the peer silence's floor is several of the heartbeats every node sends") {
  // The floor's message names NodeSetup's heartbeat interval: the two must stay in step.
  const NodeSetup setup;
  CHECK(setup.heartbeat_interval == std::chrono::milliseconds(250));
  CHECK(setup.heartbeat_interval * 4 <= std::chrono::milliseconds(static_cast<int>(kMinPeerSilenceS * 1000)));
  CHECK(setup.peer_silence == std::chrono::milliseconds(static_cast<int>(RunConfig{}.rendezvous.peer_silence_s * 1000)));
}

TEST_CASE("train refuses a short peer silence with exit 2 and one error line, config --keys lists the key") {
  TempDir dir;
  const auto r = run_command({CONVEYOR_BINARY, "train", "configs/tiny.yaml", "--set",
                              "rendezvous.peer_silence_s=0.2", "--out", dir / "run"});
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.rfind("error: ", 0) == 0);
  CHECK(r.err.find('\n') == r.err.size() - 1);
  CHECK(has(r.err, "rendezvous.peer_silence_s: must be >= 1, got 0.2"));
  CHECK(std::filesystem::is_empty(dir.path()));

  const auto keys = run_command({CONVEYOR_BINARY, "config", "--keys"});
  CHECK(keys.exit_code == 0);
  const auto at = keys.out.find("\nrendezvous.peer_silence_s ");
  REQUIRE(at != std::string::npos);
  const std::string row = keys.out.substr(at + 1, keys.out.find('\n', at + 1) - at - 1);
  CHECK(has(row, " 5 "));
  CHECK(has(row, "heartbeat"));
  CHECK(has(row, "[number, >= 1"));
}
