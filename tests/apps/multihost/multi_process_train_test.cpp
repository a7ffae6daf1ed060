// `conveyor train` over several processes on loopback: the tiny config with 4 stages
// spread over 2 and over 4 processes ends with weights.safetensors bitwise identical to
// the one-process run, launched by flags and by torchrun-style variables; transport.kind
// ucx in one process matches too. Only node 0 writes a run folder.
#include <doctest/doctest.h>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

// The one-process reference, trained once per test binary.
const std::string& reference_weights() {
  static const std::string weights = [] {
    static TempDir dir;
    auto args = tiny_job({"--out", dir / "one"});
    args.erase(args.begin());  // train_ok adds "train"
    train_ok(args, 120);
    return read_text(dir.path() / "one" / "weights.safetensors");
  }();
  return weights;
}

void require_reference(const fs::path& run) {
  const std::string got = read_text(run / "weights.safetensors");
  REQUIRE(got.size() == reference_weights().size());
  CHECK_MESSAGE(got == reference_weights(), "weights differ from the one-process run");
}

}  // namespace

TEST_CASE("4 stages over 2 processes launched by flags train to the one-process weights bit for bit") {
  TempDir dir;
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 2; ++n)
    nodes.push_back(NodeRun{tiny_job({"--nnodes", "2", "--node-rank", std::to_string(n), "--rdzv",
                                      rdzv, "--out", dir / "run", "--format", "json"}),
                            {}, {}});
  const auto start = std::chrono::steady_clock::now();
  const auto results = run_nodes(dir, nodes);
  MESSAGE("2 processes: " << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s");
  require_all_ok(results);
  require_reference(dir.path() / "run");
  CHECK(fs::exists(dir.path() / "run" / "plan.json"));
  CHECK(fs::exists(dir.path() / "run" / "metrics.jsonl"));
  CHECK(results[0].out.find("\"final_loss\"") != std::string::npos);
  CHECK(results[1].out.empty());  // node 1 prints nothing on stdout
  CHECK(results[1].err.find("stages 2 3 here") != std::string::npos);
}

TEST_CASE("4 stages over 4 processes from torchrun variables train to the one-process weights bit for bit") {
  TempDir dir;
  const std::string port = std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 4; ++n)
    nodes.push_back(NodeRun{tiny_job({"--out", dir / "run"}),
                            {{"RANK", std::to_string(n)},
                             {"WORLD_SIZE", "4"},
                             {"LOCAL_RANK", std::to_string(n)},
                             {"MASTER_ADDR", "127.0.0.1"},
                             {"MASTER_PORT", port},
                             {"CONVEYOR_TOKEN", "four-process-test"}},
                            {}});
  const auto start = std::chrono::steady_clock::now();
  const auto results = run_nodes(dir, nodes);
  MESSAGE("4 processes: " << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s");
  require_all_ok(results);
  require_reference(dir.path() / "run");
  for (int n = 1; n < 4; ++n)
    CHECK(results[n].err.find("node " + std::to_string(n) + " of 4 (torchrun)") != std::string::npos);
}

TEST_CASE("devices.per_node puts 3 stages on node 0 and 1 on node 1 with the same weights") {
  TempDir dir;
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 2; ++n)
    nodes.push_back(NodeRun{tiny_job({"--set", "devices.per_node=3", "--nnodes", "2",
                                      "--node-rank", std::to_string(n), "--rdzv", rdzv, "--out",
                                      dir / "run"}),
                            {}, {}});
  const auto results = run_nodes(dir, nodes);
  require_all_ok(results);
  require_reference(dir.path() / "run");
  CHECK(results[1].err.find("stages 3 here") != std::string::npos);
}

TEST_CASE("4 stages over 3 processes, which no devices.per_node splits, go 2, 1, 1 and keep the weights") {
  TempDir dir;
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 3; ++n)
    nodes.push_back(NodeRun{tiny_job({"--nnodes", "3", "--node-rank", std::to_string(n), "--rdzv",
                                      rdzv, "--out", dir / "run"}),
                            {}, {}});
  const auto results = run_nodes(dir, nodes);
  require_all_ok(results);
  require_reference(dir.path() / "run");
  CHECK(results[0].err.find("stages 0 1 here") != std::string::npos);
  CHECK(results[1].err.find("stages 2 here") != std::string::npos);
  CHECK(results[2].err.find("stages 3 here") != std::string::npos);
}

TEST_CASE("transport.kind ucx sends every edge of one process over UCX and keeps the weights") {
  TempDir dir;
  auto args = tiny_job({"--set", "transport.kind=ucx", "--out", dir / "run"});
  args.erase(args.begin());
  train_ok(args, 120);
  require_reference(dir.path() / "run");
}
