// Data parallelism across processes (parallel.data, issue 9): 2 replicas of a 2-stage
// pipeline over 2 processes on loopback. Node 0 runs replica 0's two stages, node 1
// replica 1's, so the pipeline edges stay inside each process and every step's gradient
// average crosses processes (a Gloo group per stage, formed over the job's store).
// The run follows the loss curve of one 2-stage pipeline with the same global batch
// within 1e-6 relative per step (fp32), ends with the weights of the same 2 replicas in
// one process bit for bit (the same averages: a ring all-reduce adds in an order that
// depends only on R and the bucket, not on where the ranks run), and its checkpoint
// (node 0 writes replica 0's stages) resumes in one process with one replica. A replica
// may also span processes (3 replicas over 2: its pipeline edge crosses them, tagged apart
// from the other replicas' edges), and transport.kind ucx takes replicas in one process.
// The tied embedding's group of two crosses processes the same way.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "kernels/io/safetensors.hpp"

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kSteps = 6;

std::vector<std::string> job(const std::vector<std::string>& extra) {
  std::vector<std::string> a{"train", "configs/tiny.yaml", "--set", "pipeline.stages=2",
                             "--set", "train.steps=" + std::to_string(kSteps), "--set",
                             "train.eval_every=0", "--set", "fault.policy=abort", "--set",
                             "rendezvous.timeout_s=20"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

void train_one_process(const std::vector<std::string>& extra) {
  auto args = job(extra);
  args.erase(args.begin());  // train_ok adds "train"
  train_ok(args, 120);
}

// Loss by step, from the step rows of a run's metrics.jsonl.
std::map<int, double> losses(const fs::path& run) {
  std::map<int, double> out;
  for (auto& row : read_jsonl(run / "metrics.jsonl"))
    if (row.contains("step") && !row.contains("event")) out[row.at("step")] = row.at("loss");
  return out;
}

double worst_relative(const std::map<int, double>& want, const std::map<int, double>& got) {
  double worst = 0;
  for (const auto& [step, loss] : got) {
    REQUIRE(want.count(step) == 1);
    worst = std::max(worst, std::fabs(loss - want.at(step)) / std::fabs(want.at(step)));
  }
  return worst;
}

// 3 replicas of 2 stages (6 micro-batches, 3 steps), then `extra`.
std::vector<std::string> three_replicas(std::vector<std::string> extra) {
  const std::vector<std::string> three{"--set", "parallel.data=3", "--set",
                                       "pipeline.micro_batches=6", "--set", "train.steps=3"};
  extra.insert(extra.begin(), three.begin(), three.end());
  return extra;
}

// The job plus `extra` on 2 nodes over loopback, writing to `out`; every node must succeed.
void run_on_two_nodes(const TempDir& dir, const std::vector<std::string>& extra,
                      const fs::path& out) {
  require_all_ok(run_nodes(dir, job_on_nodes(2, job(extra), out, "data-parallel-test"), 120));
}

}  // namespace

TEST_CASE("2 replicas of 2 stages over 2 processes train as one pipeline, end as in one process, and checkpoint for one") {
  TempDir dir;
  const fs::path one = dir.path() / "one", local = dir.path() / "local", run = dir.path() / "run";
  train_one_process({"--out", one.string()});
  train_one_process({"--out", local.string(), "--set", "parallel.data=2"});

  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 2; ++n)
    nodes.push_back(NodeRun{job({"--set", "parallel.data=2", "--set", "checkpoint.every=3",
                                 "--nnodes", "2", "--node-rank", std::to_string(n), "--rdzv",
                                 rdzv, "--out", run.string()}),
                            {{"CONVEYOR_TOKEN", "data-parallel-test"}},
                            {}});
  const auto results = run_nodes(dir, nodes, 120);
  require_all_ok(results);

  // The loss curve of one replica with the global batch.
  const auto want = losses(one), got = losses(run);
  REQUIRE(want.size() == kSteps);
  REQUIRE(got.size() == kSteps);
  const double worst = worst_relative(want, got);
  MESSAGE("tiny.yaml, 2 stages, " << kSteps << " steps: worst relative loss difference, 2 "
          "replicas over 2 processes vs 1 replica: " << worst);
  CHECK(worst <= 1e-6);
  for (auto& row : read_jsonl(run / "metrics.jsonl"))
    if (row.contains("step") && !row.contains("event"))
      CHECK(row.at("stage_busy_ms").size() == 4);  // both replicas' stages report

  // The weights of the same replicas in one process, bit for bit.
  const std::string weights = read_text(run / "weights.safetensors");
  CHECK(!weights.empty());
  CHECK(weights == read_text(local / "weights.safetensors"));

  // plan.json lists every replica's stages and where they ran.
  const auto plan = nlohmann::json::parse(read_text(run / "plan.json"));
  CHECK(plan.at("data_parallel") == 2);
  REQUIRE(plan.at("replicas").size() == 2);
  for (int r = 0; r < 2; ++r)
    for (int s = 0; s < 2; ++s) {
      const auto& stage = plan.at("replicas")[r].at("stages").at(s);
      CHECK(stage.at("stage") == 2 * r + s);
      CHECK(stage.at("device") == "cpu");
      CHECK(stage.at("node") == r);
    }

  // Node 0 wrote replica 0's stages; the checkpoint resumes in one process, one replica.
  const fs::path step3 = run / "checkpoints" / "step-000003";
  const auto manifest = nlohmann::json::parse(read_text(step3 / "manifest.json"));
  CHECK(manifest.at("shards").size() == 2);
  const fs::path resumed = dir.path() / "resumed";
  train_one_process({"--out", resumed.string(), "--resume", step3.string()});
  const auto after = losses(resumed);
  CHECK(after.size() == kSteps - 3);
  CHECK(after.begin()->first == 3);
  CHECK(worst_relative(want, after) <= 1e-6);

  // Node 1 wrote no files of its own and said nothing on stdout.
  CHECK(results[1].out.empty());
}

TEST_CASE("3 replicas of 2 stages over 2 processes: replica 1 spans both, its pipeline edge crosses, same weights as in one process") {
  TempDir dir;
  const fs::path local = dir.path() / "local", run = dir.path() / "run";
  train_one_process(three_replicas({"--out", local.string()}));
  run_on_two_nodes(dir, three_replicas({}), run);
  const auto plan = nlohmann::json::parse(read_text(run / "plan.json"));
  const auto& replica1 = plan.at("replicas").at(1).at("stages");
  CHECK(replica1.at(0).at("node") == 0);  // actor 2
  CHECK(replica1.at(1).at("node") == 1);  // actor 3
  CHECK(read_text(run / "weights.safetensors") == read_text(local / "weights.safetensors"));
}

TEST_CASE("optim.shard_state with 3 replicas over 2 processes ends and checkpoints as unsharded in one process") {
  TempDir dir;
  const fs::path local = dir.path() / "local", run = dir.path() / "run";
  train_one_process(three_replicas({"--set", "checkpoint.every=3", "--out", local.string()}));
  run_on_two_nodes(dir,
                   three_replicas({"--set", "checkpoint.every=3", "--set", "optim.shard_state=true",
                                   "--set", "fault.policy=restart"}),
                   run);
  CHECK(read_text(run / "weights.safetensors") == read_text(local / "weights.safetensors"));
  // Node 0 asked all six stage actors (three of them in the other process) for their
  // thirds of the moments: the stage files hold the unsharded run's tensors.
  const fs::path a = local / "checkpoints" / "step-000003", b = run / "checkpoints" / "step-000003";
  int files = 0;
  for (const auto& entry : fs::directory_iterator(a)) {
    if (entry.path().extension() != ".safetensors") continue;
    ++files;
    const auto x = conveyor::read_safetensors(entry.path().string());
    const auto y = conveyor::read_safetensors((b / entry.path().filename()).string());
    REQUIRE(x.size() == y.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      CAPTURE(x[i].name);
      CHECK(x[i].name == y[i].name);
      REQUIRE(x[i].tensor.bytes() == y[i].tensor.bytes());
      CHECK(std::memcmp(x[i].tensor.raw(), y[i].tensor.raw(), x[i].tensor.bytes()) == 0);
    }
  }
  CHECK(files == 2);

  // Without the snapshots (fault.policy abort) node 0 could not collect the other node's
  // parts: refused before anything starts, naming what to set.
  auto refused = job(three_replicas({"--set", "checkpoint.every=3", "--set",
                                     "optim.shard_state=true", "--nnodes", "2", "--node-rank", "0",
                                     "--rdzv", "127.0.0.1:" + std::to_string(free_port()), "--out",
                                     (dir.path() / "refused").string()}));
  const auto r = run_conveyor(refused, 60);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("fault.snapshot_every must be > 0") != std::string::npos);
  CHECK(r.err.find("optim.shard_state") != std::string::npos);
}

TEST_CASE("2 replicas with transport.kind ucx in one process send every edge over UCX and keep the weights") {
  TempDir dir;
  const fs::path plain = dir.path() / "plain", ucx = dir.path() / "ucx";
  train_one_process({"--set", "parallel.data=2", "--set", "train.steps=3", "--out", plain.string()});
  train_one_process({"--set", "parallel.data=2", "--set", "train.steps=3", "--set",
                     "transport.kind=ucx", "--out", ucx.string()});
  CHECK(read_text(ucx / "weights.safetensors") == read_text(plain / "weights.safetensors"));
}

// model.tie_embeddings over processes: the embedding's holder (node 0) and the head's
// (node 1) sum the tied gradient in a Gloo group of two formed over the job's store, alone
// (one replica) and beside the stage groups of 2 replicas.
TEST_CASE("tied embeddings over 2 processes end with the weights of one process, with 1 and 2 replicas") {
  TempDir dir;
  for (const int replicas : {1, 2}) {
    CAPTURE(replicas);
    const std::vector<std::string> tied{"--set", "model.tie_embeddings=true", "--set",
                                        "parallel.data=" + std::to_string(replicas), "--set",
                                        "train.steps=3"};
    auto with = [&](std::vector<std::string> extra) {
      extra.insert(extra.begin(), tied.begin(), tied.end());
      return extra;
    };
    const fs::path local = dir.path() / ("local" + std::to_string(replicas)),
                   run = dir.path() / ("run" + std::to_string(replicas));
    train_one_process(with({"--out", local.string()}));
    const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
    std::vector<NodeRun> nodes;
    for (int n = 0; n < 2; ++n)
      nodes.push_back(NodeRun{job(with({"--nnodes", "2", "--node-rank", std::to_string(n),
                                        "--rdzv", rdzv, "--out", run.string()})),
                              {{"CONVEYOR_TOKEN", "tied-test"}},
                              {}});
    require_all_ok(run_nodes(dir, nodes, 120));
    const auto plan = nlohmann::json::parse(read_text(run / "plan.json"));
    // One replica: its two stages on nodes 0 and 1, so the tied sum crosses them.
    if (replicas == 1) CHECK(plan.at("replicas").at(0).at("stages").at(1).at("node") == 1);
    CHECK(read_text(run / "weights.safetensors") == read_text(local / "weights.safetensors"));
  }
}

// Replicas over processes with fault.policy restart: a failed stage, on either node, is
// respawned in its process and every stage goes back to the in-memory snapshot (a
// replica's state is not copied across processes); a lost node's replacement rejoins
// and its stages join the stage groups' next generation with the others (without buddy
// copies, every stage loads the newest checkpoint first). Each run ends
// with the weights of the same 2 replicas in one process without a fault.
TEST_CASE("2 replicas over 2 processes recover crashes on either node and a lost node, bitwise") {
  TempDir dir;
  const std::vector<std::string> restart{"--set", "parallel.data=2", "--set", "train.steps=12",
                                         "--set", "fault.policy=restart", "--set",
                                         "fault.rejoin_timeout_s=60"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), restart.begin(), restart.end());
    return extra;
  };
  const fs::path local = dir.path() / "local";
  train_one_process(with({"--out", local.string()}));
  const std::string want = read_text(local / "weights.safetensors");

  struct Case {
    std::string name;
    std::vector<std::string> extra;
    std::string kill_when;  // node 1 killed and started again when node 0 prints this
    std::vector<std::string> faults;
    std::string restored_from;  // how the recovery rows start
  };
  // Without buddy copies every stage of both replicas loads its stage's shard of the
  // newest checkpoint (step 4, or 2 when the kill lands before step 4's is written).
  const std::vector<Case> cases = {
      {"crashes", {"--set", "fault.inject=[crash:stage=1:step=3,crash:stage=3:step=6]"}, "",
       {"crash", "crash"}, "snapshot"},
      {"lost node", {}, "step 5/12", {"node"}, "snapshot"},
      {"lost node, no buddy copies",
       {"--set", "fault.buddy_copies=off", "--set", "checkpoint.every=2"},
       "step 5/12",
       {"node"},
       "checkpoint "},
      // The checkpoint holds each stage's AdamW state merged; every replica restores its
      // part of it (restore_state cuts whole moments to the model's shard).
      {"lost node, no buddy copies, sharded optimizer state",
       {"--set", "fault.buddy_copies=off", "--set", "checkpoint.every=2", "--set", "optim.shard_state=true"},
       "step 5/12",
       {"node"},
       "checkpoint "}};
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const fs::path run = dir.path() / c.name;
    const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
    std::vector<NodeRun> nodes;
    for (int n = 0; n < 2; ++n) {
      auto extra = with(c.extra);
      extra.insert(extra.end(), {"--nnodes", "2", "--node-rank", std::to_string(n), "--rdzv",
                                 rdzv, "--out", run.string()});
      nodes.push_back(NodeRun{job(extra), {{"CONVEYOR_TOKEN", "replica-restart-test"}}, {}});
    }
    if (!c.kill_when.empty()) {
      nodes[1].kill_when_node0_says = c.kill_when;
      nodes[1].restart_after_kill = true;
    }
    const auto results = run_nodes(dir, nodes, 120);
    INFO("node 0:\n" << results[0].err);
    require_all_ok(results);
    std::vector<std::string> faults;
    for (auto& row : read_jsonl(run / "metrics.jsonl"))
      if (row.value("event", "") == "recovery") {
        faults.push_back(row.at("fault"));
        CHECK(row.at("restored_from").get<std::string>().starts_with(c.restored_from));
      }
    CHECK(faults == c.faults);
    CHECK(read_text(run / "weights.safetensors") == want);
  }
}
