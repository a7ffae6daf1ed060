// A run that died mid-row (a full disk, SIGKILL) leaves metrics.jsonl without its last
// newline; the resumed run drops that partial row, saying so, so that every line of the
// file is still one JSON object.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

TEST_CASE("a resumed run drops the partial last row of metrics.jsonl") {
  TempDir dir;
  const std::string run = dir / "run";
  const std::vector<std::string> base{"configs/tiny.yaml", "--set", "train.eval_every=0", "--set",
                                      "checkpoint.every=2", "--out", run};
  auto args = base;
  args.insert(args.end(), {"--set", "train.steps=2"});
  train_ok(args);
  const fs::path metrics = fs::path(run) / "metrics.jsonl";
  const auto whole = fs::file_size(metrics);
  {
    std::ofstream out(metrics, std::ios::app);
    out << R"({"bubble":0.25,"event":"st)";  // cut off mid-write
  }
  fs::remove(fs::path(run) / "weights.safetensors");  // as if the run had not finished
  args = base;
  args.insert(args.end(), {"--set", "train.steps=4", "--resume", "latest"});
  const auto r = train_ok(args);
  CHECK(r.err.find("metrics.jsonl: dropped a partial last row (26 bytes) an earlier run left") !=
        std::string::npos);
  CHECK(fs::file_size(metrics) > whole);
  std::istringstream lines(read_text(metrics));
  int rows = 0;
  for (std::string line; std::getline(lines, line); ++rows) {
    CAPTURE(line);
    CHECK(nlohmann::json::accept(line));
  }
  CHECK(rows >= 6);
}

TEST_CASE("a resumed run refuses a metrics.jsonl that is not a regular file (a FIFO blocked it)") {
  TempDir dir;
  const std::string run = dir / "run";
  train_ok({"configs/tiny.yaml", "--set", "train.steps=2", "--set", "train.eval_every=0", "--set",
            "checkpoint.every=2", "--out", run});
  const fs::path metrics = fs::path(run) / "metrics.jsonl";
  fs::remove(metrics);
  REQUIRE(::mkfifo(metrics.c_str(), 0644) == 0);
  const auto r = run_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=4", "--out", run, "--resume",
                               "latest"},
                              30);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("metrics.jsonl exists and is not a regular file") != std::string::npos);
}
