// A traced run over several processes is one trace: every process writes its own
// trace/process-<node>.ctrace (with its clock offset from the rendezvous), and the tools
// merge them: sends in one process match receives in the other, the export shows one
// process per node, and the check finds the executed order of every stage as planned.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <set>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

TEST_CASE("a traced run over 2 processes is one trace: a file per process, flows matched across them") {
  TempDir dir;
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 2; ++n)
    nodes.push_back(NodeRun{tiny_job({"--set", "trace.enabled=true", "--nnodes", "2", "--node-rank",
                                      std::to_string(n), "--rdzv", rdzv, "--out", dir / "run"}),
                            {}, {}});
  require_all_ok(run_nodes(dir, nodes));
  const auto run = dir.path() / "run";
  CHECK(fs::exists(run / "trace" / "process-0.ctrace"));
  CHECK(fs::exists(run / "trace" / "process-1.ctrace"));

  const auto check = run_conveyor({"trace", "check", run.string(), "--format", "json"});
  INFO("trace check: " << check.out << check.err);
  CHECK(check.exit_code == 0);
  const auto findings = nlohmann::json::parse(check.out);
  CHECK(findings.at("findings").empty());

  const auto out = dir.path() / "trace.json";
  const auto exported = run_conveyor({"trace", "export", run.string(), "--chrome", out.string()});
  REQUIRE(exported.exit_code == 0);
  const auto events = nlohmann::json::parse(read_text(out)).at("traceEvents");
  std::set<int> pids;
  std::map<std::string, std::set<int>> flow_pids;  // flow id → the processes of its ends
  std::map<std::string, int> flow_ends;
  for (const auto& e : events) {
    if (e.value("ph", "") == "X") pids.insert(e.at("pid").get<int>());
    const auto ph = e.value("ph", "");
    if (ph == "s" || ph == "f") {
      const auto id = e.at("id").dump();
      flow_pids[id].insert(e.at("pid").get<int>());
      ++flow_ends[id];
    }
  }
  CHECK(pids.size() == 2);  // one process per node
  int crossing = 0;
  for (const auto& [id, ends] : flow_ends) {
    CHECK_MESSAGE(ends == 2, "flow " << id << " has " << ends << " end(s)");
    crossing += flow_pids[id].size() == 2;
  }
  // Stage 1 → 2 activations and 2 → 1 gradients cross: 8 micro-batches each, 5 steps.
  CHECK(crossing >= 2 * 8 * 5);
}
