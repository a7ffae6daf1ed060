// Config input that used to pass and then did nothing or something else: a directory or a
// device as the config file, a second YAML document, a section given twice, fault.inject
// entries aimed at stages, micro-batches or steps the run does not have, trace.steps past
// the last step, deadlines that overflow the clock, plans too large to hold.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "apps/config/config_loader.hpp"
#include "kernels/common/error.hpp"
#include "tests/support/temp_dir.hpp"

using namespace conveyor;
using conveyor::testing::TempDir;

namespace {

std::string error_of(const std::string& path, const std::vector<std::string>& sets) {
  try {
    load_run_config(path, sets);
  } catch (const InputError& e) {
    return e.what();
  }
  return "<accepted>";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a directory, a device or a second YAML document is not a config") {
  TempDir dir;
  CHECK(has(error_of(dir.path().string(), {}), "is a directory, not a config file"));
  CHECK(has(error_of("/dev/null", {}), "is not a regular file"));
  const std::string two = dir.write("two.yaml", "model:\n  layers: 2\n---\nmodle: {layers: 2}\n");
  const std::string e = error_of(two, {});
  CHECK(has(e, two + ":4: a second YAML document"));
  // A leading '---' opens the one document: still one config.
  CHECK(error_of(dir.write("one.yaml", "---\nmodel:\n  layers: 8\n"), {}) == "<accepted>");
}

TEST_CASE("a section given twice in a file is refused, naming both places") {
  TempDir dir;
  const std::string f = dir.write("c.yaml", "model:\n  layers: 2\ntrain:\n  steps: 3\nmodel:\n  d_model: 64\n");
  CHECK(has(error_of(f, {}), f + ":5: model: section given twice (first at " + f + ":1)"));
}

TEST_CASE("fault.inject entries must hit a stage, micro-batch and step the run has") {
  const std::vector<std::string> run{"pipeline.stages=2", "model.layers=4", "pipeline.micro_batches=4",
                                     "train.steps=5"};
  auto with = [&](const std::string& entry) {
    auto sets = run;
    sets.push_back("fault.inject=[" + entry + "]");
    return error_of("", sets);
  };
  CHECK(with("crash:stage=1:step=4") == "<accepted>");
  CHECK(has(with("crash:stage=2:step=1"), "stage 2 does not exist: the run has 2 stage actors"));
  CHECK(has(with("slow:stage=9:ms=5"), "stage 9 does not exist"));
  CHECK(has(with("crash:stage=0:step=5"), "step 5 is never run: train.steps 5 gives steps 0..4"));
  CHECK(has(with("drop:stage=0:step=1:micro_batch=4"), "micro_batch 4 does not exist"));
  CHECK(with("corrupt-checkpoint:step=5") == "<accepted>");
  CHECK(has(with("corrupt-checkpoint:step=6"), "step 6 is never checkpointed"));
  // With replicas, the stage actors of every replica count.
  auto sets = run;
  sets.insert(sets.end(), {"parallel.data=2", "fault.inject=[crash:stage=3:step=1]"});
  CHECK(error_of("", sets) == "<accepted>");
}

TEST_CASE("trace.steps past the last step, deadlines past a week and huge plans are refused") {
  CHECK(has(error_of("", {"train.steps=3", "trace.enabled=true", "trace.steps=3"}),
            "trace.steps: '3' starts after the last step"));
  CHECK(error_of("", {"train.steps=3", "trace.enabled=true", "trace.steps=1-9"}) == "<accepted>");
  CHECK(error_of("", {"train.steps=3", "trace.steps=7"}) == "<accepted>");  // not traced
  CHECK(has(error_of("", {"watchdog.timeout_s=1e10"}), "watchdog.timeout_s: must be <= 604800"));
  CHECK(has(error_of("", {"rendezvous.timeout_s=1e12"}), "must be <= 604800"));
  CHECK(has(error_of("", {"pipeline.micro_batches=100000"}), "must be <= 65536"));
  CHECK(has(error_of("", {"train.eval_batches=1000000000"}), "must be <= 65536"));
}
