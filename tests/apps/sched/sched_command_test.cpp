// `conveyor sched` end to end (the binary), plus pipeline.partition through the config and
// the job builder in process.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../support/run_command.hpp"
#include "apps/config/config_loader.hpp"
#include "apps/train/job_builder.hpp"
#include "apps/train/partition_choice.hpp"
#include "apps/train/plan_json.hpp"
#include "kernels/common/error.hpp"

namespace fs = std::filesystem;
using conveyor::testing::CommandResult;
using conveyor::testing::run_command;

namespace {

CommandResult sched(std::vector<std::string> args) {
  args.insert(args.begin(), {CONVEYOR_BINARY, "sched"});
  conveyor::testing::CommandOptions options;
  options.cwd = CONVEYOR_SOURCE_DIR;
  options.timeout = std::chrono::seconds(60);
  return run_command(args, options);
}

nlohmann::json sched_json(std::vector<std::string> args) {
  args.push_back("--format");
  args.push_back("json");
  const CommandResult r = sched(args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);  // throws unless stdout is exactly one JSON document
}

struct SchedTempDir {
  fs::path path;
  SchedTempDir() {
    static int n = 0;
    path = fs::temp_directory_path() / ("conveyor_sched_test_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::create_directories(path);
  }
  ~SchedTempDir() { fs::remove_all(path); }
  std::string file(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

// A GPU config with a 32768-token vocabulary: planned with the cost model, no GPU needed.
const char* kLargeVocabCuda = R"(model: {layers: 8, d_model: 256, heads: 4, seq_len: 256, vocab: 32768}
pipeline: {stages: 4, schedule: 1f1b, micro_batches: 8, micro_batch_size: 4, partition: auto}
devices: {kind: cuda}
)";

std::string input_error(const auto& f) {
  try {
    f();
  } catch (const conveyor::InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

}  // namespace

TEST_CASE("sched --format json gives 1F1B's bubble 3/11 for p = 4, m = 8") {
  const auto j = sched_json({"--schedule", "1f1b", "--stages", "4", "--micro-batches", "8"});
  CHECK(std::abs(j.at("bubble").get<double>() - 3.0 / 11.0) < 1e-12);
  CHECK(j.at("makespan").get<double>() == 33.0);
  CHECK(j.at("stage_bubble").size() == 4);
  CHECK(j.at("peak_activations") == nlohmann::json({4, 3, 2, 1}));
  REQUIRE(j.at("schedule").size() == 4);
  CHECK(j.at("schedule")[1][0] == "1F0");
  CHECK(j.at("communication").is_null());
}

TEST_CASE("sched --format json gives the ZB-H1 and ZB-V bubbles (p-1)/(3m+p-1) and (p-1)/(6m+p-1)") {
  // F = I = W = 1: ZB-H1 (p-1)/(3m+p-1) = 3/27, ZB-V (p-1)/(6m+p-1) = 3/51.
  const auto h1 = sched_json({"--schedule", "zb-h1", "--stages", "4", "--micro-batches", "8", "--durations", "1,2,1,1"});
  CHECK(std::abs(h1.at("bubble").get<double>() - 3.0 / 27.0) < 1e-12);
  const auto v = sched_json({"--schedule", "zbv", "--stages", "4", "--micro-batches", "8"});
  CHECK(std::abs(v.at("bubble").get<double>() - 3.0 / 51.0) < 1e-12);
  CHECK(v.at("virtual_stages") == 2);
  CHECK(v.at("schedule")[0][0] == "0F0c0");
  // ZB-H1 idles (p-1)(F + I - W) per rank.
  const auto uneven = sched_json({"--schedule", "zb-h1", "--stages", "4", "--micro-batches", "8", "--durations", "2,0,1.5,0.5"});
  for (const auto& idle : uneven.at("idle")) CHECK(idle.get<double>() == doctest::Approx(3 * (2 + 1.5 - 0.5)));
}

TEST_CASE("sched prints the grid, the makespan, the bubbles and peak activations") {
  const CommandResult r = sched({"--schedule", "1f1b", "--stages", "2", "--micro-batches", "4"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("rank 0   0F0    0F1    0B0    0F2    0B1    0F3    0B2    0B3") != std::string::npos);
  CHECK(r.out.find("makespan          15 us") != std::string::npos);
  CHECK(r.out.find("stage bubble      rank 0: 20.00%, rank 1: 20.00%") != std::string::npos);
  CHECK(r.out.find("peak activations  rank 0: 2, rank 1: 1") != std::string::npos);
  CHECK(r.out.find("communication: free") != std::string::npos);
}

TEST_CASE("sched --comm costs every message between ranks and names the message size") {
  const auto free = sched_json({"--schedule", "1f1b", "--stages", "4", "--micro-batches", "8"});
  const auto paid = sched_json({"--schedule", "1f1b", "--stages", "4", "--micro-batches", "8", "--comm", "10,1",
                                "--message-bytes", "1000"});
  CHECK(paid.at("communication").at("message_us").get<double>() == doctest::Approx(11.0));
  CHECK(paid.at("makespan").get<double>() > free.at("makespan").get<double>());
  const std::string first = paid.at("schedule")[0][1];
  CHECK(first == "0SEND_F0");
  const CommandResult text = sched({"--schedule", "1f1b", "--stages", "2", "--micro-batches", "2", "--comm", "5,25"});
  CHECK(text.out.find("1048576 bytes") != std::string::npos);
  CHECK(text.out.find("--message-bytes") != std::string::npos);
}

TEST_CASE("sched with every duration 0 reports no bubble and says why") {
  const std::vector<std::string> zero = {"--schedule", "1f1b", "--stages", "2", "--micro-batches", "2",
                                         "--durations", "0,0,0,0"};
  const auto j = sched_json(zero);
  CHECK(j.at("makespan") == 0.0);
  CHECK(j.at("bubble") == 0.0);  // a number, not the null that NaN dumps as
  const CommandResult text = sched(zero);
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("bubble            0 (the makespan is 0: every action takes 0 us, so no rank waits)") !=
        std::string::npos);
}

TEST_CASE("sched --comm with a bandwidth of 0 says which number it is and how to make communication free") {
  const CommandResult r = sched({"--schedule", "1f1b", "--stages", "2", "--micro-batches", "2", "--comm", "0,0"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("--comm '0,0': GBPS (the second number, the bandwidth in GB/s) is 0, must be > 0") !=
        std::string::npos);
  CHECK(r.err.find("or no --comm for free communication (e.g. --comm 5,25)") != std::string::npos);
  const CommandResult one = sched({"--schedule", "1f1b", "--stages", "2", "--micro-batches", "2", "--comm", "5"});
  CHECK(one.err.find("--comm '5': got 1 number; expected LATENCY_US,GBPS: a latency in us >= 0 and a bandwidth "
                     "in GB/s > 0") != std::string::npos);
}

TEST_CASE("sched --format csv reads back as the schedule") {
  const CommandResult r = sched({"--schedule", "1f1b", "--stages", "2", "--micro-batches", "4", "--format", "csv"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("# makespan") != std::string::npos);
  CHECK(r.out.find("0F0,0F1,0B0,0F2,0B1,0F3,0B2,0B3\n1F0,1B0,1F1,1B1,1F2,1B2,1F3,1B3\n") != std::string::npos);
}

TEST_CASE("sched exits 2 naming the flag for bad values") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--schedule", "2f2b", "--stages", "4", "--micro-batches", "8"}, "--schedule '2f2b'"},
      {{"--schedule", "1f1b", "--stages", "0", "--micro-batches", "8"}, "--stages 0"},
      {{"--schedule", "1f1b", "--stages", "4", "--micro-batches", "0"}, "--micro-batches 0"},
      {{"--schedule", "1f1b", "--stages", "four", "--micro-batches", "8"}, "--stages"},
      {{"--schedule", "1f1b", "--stages", "4", "--micro-batches", "8", "--durations", "1,2,x,1"}, "--durations '1,2,x,1'"},
      {{"--schedule", "1f1b", "--stages", "4", "--micro-batches", "8", "--durations", "1,2,1"}, "--durations"},
      {{"--schedule", "1f1b", "--stages", "4", "--micro-batches", "8", "--durations", "1,-2,1,1"}, "--durations"},
      {{"--schedule", "1f1b", "--stages", "4", "--micro-batches", "8", "--comm", "5"}, "--comm"},
      {{"--schedule", "1f1b", "--stages", "4", "--micro-batches", "8", "--comm", "5,0"}, "GBPS"},
      {{"--schedule", "1f1b", "--stages", "4", "--micro-batches", "8", "--format", "xml"}, "--format"},
      {{"--schedule", "interleaved-1f1b", "--stages", "4", "--micro-batches", "6", "--virtual-stages", "2"},
       "--micro-batches = 6"},
      {{"--schedule", "1f1b", "--stages", "4"}, "--micro-batches"},
      {{}, "--schedule"},
      {{"configs/tiny.yaml", "--stages", "2"}, "--stages"},
  };
  for (const auto& [args, names] : cases) {
    const CommandResult r = sched(args);
    CAPTURE(names);
    CAPTURE(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(names) != std::string::npos);
    CHECK(r.out.empty());
  }
}

TEST_CASE("sched --help describes the flags") {
  const CommandResult r = sched({"--help"});
  CHECK(r.exit_code == 0);
  for (const char* flag : {"--schedule", "--stages", "--micro-batches", "--virtual-stages", "--durations", "--comm",
                           "--message-bytes", "--format", "--set"}) {
    CHECK(r.out.find(flag) != std::string::npos);
  }
}

TEST_CASE("sched CONFIG plans a GPU config on a machine without one, and auto beats uniform") {
  SchedTempDir dir;
  const auto j = sched_json({dir.file("gpu.yaml", kLargeVocabCuda)});
  CHECK(j.at("partition") == "auto");
  const auto blocks = j.at("blocks_per_stage").get<std::vector<double>>();
  const auto uniform = j.at("uniform").at("blocks_per_stage").get<std::vector<double>>();
  CHECK(uniform == std::vector<double>{2, 2, 2, 2});
  CHECK(blocks.back() < uniform.back());
  CHECK(j.at("makespan").get<double>() < j.at("uniform").at("makespan").get<double>());
  CHECK(j.at("costs").at("source").get<std::string>().find("cost model") != std::string::npos);
  CHECK(j.at("partition_reason").get<std::string>().find("cost model") != std::string::npos);
  CHECK(j.at("plan").at("blocks_per_stage").get<std::vector<double>>() == blocks);
  CHECK(j.at("plan").at("placement")[3].at("layers").back() == "head");
}

TEST_CASE("sched CONFIG honours an explicit partition and rejects a bad one naming the key") {
  const auto j = sched_json({"configs/tiny.yaml", "--set", "model.layers=8", "--set", "pipeline.partition=[3,2,2,1]"});
  CHECK(j.at("partition") == "explicit");
  CHECK(j.at("blocks_per_stage") == nlohmann::json({3, 2, 2, 1}));
  CHECK(j.at("plan").at("placement")[0].at("layers") ==
        nlohmann::json({"embedding", "block 0", "block 1", "block 2"}));
  CHECK(j.at("costs").at("source").get<std::string>().find("measured on this CPU") == 0);
  CHECK(j.contains("auto"));  // what auto would choose, for comparison

  for (const auto& [value, says] : std::vector<std::pair<std::string, std::string>>{
           {"[2,2]", "has 2 entries"}, {"[2,2,2,2]", "sums to 8"}, {"[1,0,2,1]", "at least half a block"},
           {"[1,1.25,1,1]", "not a whole number of half blocks"}, {"[1,x,1,1]", "element 1"},
           {"best", "expected uniform, auto or a list"}}) {
    const CommandResult r = sched({"configs/tiny.yaml", "--set", "pipeline.partition=" + value});
    CAPTURE(value);
    CAPTURE(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("pipeline.partition") != std::string::npos);
    CHECK(r.err.find(says) != std::string::npos);
  }
}

TEST_CASE("pipeline.partition reads a name or a list and writes it back") {
  using conveyor::load_run_config;
  CHECK(load_run_config("", {}).pipeline.partition_mode == conveyor::PartitionMode::uniform);
  CHECK(load_run_config("", {"pipeline.partition=auto"}).pipeline.partition_mode == conveyor::PartitionMode::automatic);
  const auto c = load_run_config("", {"pipeline.partition=[2,1,1,1]", "model.layers=5"});
  CHECK(c.pipeline.partition_mode == conveyor::PartitionMode::explicit_list);
  CHECK(c.pipeline.partition_halves == std::vector<std::int64_t>{4, 2, 2, 2});
  const std::string yaml = conveyor::to_yaml(c);
  CHECK(yaml.find("partition: [2, 1, 1, 1]") != std::string::npos);
  CHECK(conveyor::to_yaml(conveyor::parse_run_config(conveyor::resolved_yaml(c))) == yaml);
  // Half blocks: a stage may end after a block's attention half.
  const auto half = load_run_config("", {"pipeline.partition=[1.5,1.5,1,1]", "model.layers=5"});
  CHECK(half.pipeline.partition_halves == std::vector<std::int64_t>{3, 3, 2, 2});
  const std::string half_yaml = conveyor::to_yaml(half);
  CHECK(half_yaml.find("partition: [1.5, 1.5, 1, 1]") != std::string::npos);
  CHECK(conveyor::to_yaml(conveyor::parse_run_config(conveyor::resolved_yaml(half))) == half_yaml);
  // zbv has 2 chunks per stage: 8 model stages on 4 stages.
  const std::string msg = input_error([] {
    load_run_config("", {"pipeline.schedule=zbv", "model.layers=8", "pipeline.partition=[2,2,2,2]"});
  });
  CHECK(msg.find("pipeline.partition") != std::string::npos);
  CHECK(msg.find("8 model stages") != std::string::npos);
}

TEST_CASE("The job builder records the partition in plan.json") {
  SchedTempDir dir;
  const std::string corpus = std::string(CONVEYOR_SOURCE_DIR) + "/data/tiny_corpus.txt";
  auto config = conveyor::load_run_config("", {"data.path=" + corpus, "model.layers=6", "pipeline.partition=auto"});
  const auto plan = conveyor::plan_json(conveyor::build_job_plan(config));
  CHECK(plan.at("partition") == "auto");
  CHECK(plan.at("partition_reason").get<std::string>().find("auto partition") == 0);
  double sum = 0;  // 1.5 where a stage holds half a block
  for (const auto& b : plan.at("blocks_per_stage")) sum += b.get<double>();
  CHECK(sum == 6);

  config = conveyor::load_run_config("", {"data.path=" + corpus});
  const auto uniform = conveyor::plan_json(conveyor::build_job_plan(config));
  CHECK(uniform.at("partition") == "uniform");
  CHECK(uniform.at("blocks_per_stage") == nlohmann::json({1, 1, 1, 1}));
}
