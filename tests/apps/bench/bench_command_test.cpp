// `conveyor bench`: figures as one JSON document on stdout, bad values exit 2.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

TEST_CASE("bench e2e prints the throughput of a config as one JSON document") {
  const auto r = run_conveyor({"bench", "e2e", "--steps", "4", "--warmup", "1", "--format",
                               "json", "--set", "pipeline.stages=2", "--set",
                               "pipeline.micro_batches=4"},
                              120);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["bench"] == "e2e");
  CHECK(j["counted_steps"] == 3);
  CHECK(j["tokens_per_s"].get<double>() > 0);
  CHECK(j["step_ms"].get<double>() > 0);
  CHECK(j["tflops_per_gpu"].get<double>() > 0);
  REQUIRE(j["peak_memory_gib"].size() == 1);
  CHECK(j["peak_memory_gib"][0].get<double>() > 0);
}

TEST_CASE("bench e2e reports tokens_per_s of its median step: tokens_per_step / step_ms * 1000") {
  // 4 counted steps: an even count, where separate medians of step_ms and tokens_per_s
  // would be the times of two different steps.
  const auto r = run_conveyor({"bench", "e2e", "--steps", "5", "--warmup", "1", "--format",
                               "json", "--set", "pipeline.stages=2", "--set",
                               "pipeline.micro_batches=4"},
                              120);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["counted_steps"] == 4);
  REQUIRE(j["tokens_per_step"] == 4 * 4 * 64);  // micro-batches × micro_batch_size × seq_len
  const double step_ms = j["step_ms"].get<double>();
  CHECK(j["tokens_per_s"].get<double>() == 4 * 4 * 64 / step_ms * 1000);
}

TEST_CASE("bench overhead reports the cost per action over every executed action") {
  const auto r = run_conveyor({"bench", "overhead", "--steps", "20", "--micro-batches", "16",
                               "--scheduled", "--format", "json"},
                              60);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["actions"] == 2 * 2 * 16 * 20);  // 2 ranks × (F + B) × micro-batches × steps
  CHECK(j["stage_threads"] == "scheduled");
  CHECK(j["per_action_us"].get<double>() > 0);
  // The step's time over the actions of its critical path, after the warm-up steps --help
  // names (the median step of the counted ones): 1F1B over P = 2 ranks, M = 16 at one
  // unit an action ends at 2M + 2(P - 1) = 34 (rank 1's 32 actions wait for 2 of rank 0's).
  CHECK(j["warmup_steps"] == 5);
  CHECK(j["critical_path_actions"] == 34);
  CHECK(j["per_action_us"].get<double>() == doctest::Approx(j["step_us_median"].get<double>() / 34));
  CHECK(run_conveyor({"bench", "overhead", "--help"}).out.find("the first 5 are warm-up") !=
        std::string::npos);
}

TEST_CASE("bench with a bad value exits 2 naming it") {
  const auto steps = run_conveyor({"bench", "e2e", "--steps", "1", "--warmup", "2"});
  CHECK(steps.exit_code == 2);
  CHECK(steps.err.find("--steps") != std::string::npos);
  const auto stages = run_conveyor({"bench", "overhead", "--stages", "0"});
  CHECK(stages.exit_code == 2);
  CHECK(stages.err.find("--stages") != std::string::npos);
  CHECK(stages.out.empty());
  // The first step is warm-up: the range in --help says 2 at least, and the parser holds it.
  const auto one = run_conveyor({"bench", "overhead", "--steps", "1"});
  CHECK(one.exit_code == 2);
  CHECK(one.err.find("--steps: Value 1 not in range 2 to 1048576") != std::string::npos);
  CHECK(run_conveyor({"bench", "overhead", "--help"}).out.find("INT in [2 - 1048576]") != std::string::npos);
}

TEST_CASE("bench number flags out of range or not numbers exit 2 naming flag, value and range") {
  // Each would run for minutes (or ask for 100000 threads) were it not refused.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"overhead", "--stages", "100000"}, "--stages: Value 100000 not in range 1 to 1024"},
      {{"overhead", "--stages", "two"}, "--stages: Value two not in range 1 to 1024"},
      {{"overhead", "--schedule", "2f2b"}, "--schedule: 2f2b not in {gpipe,1f1b,"},
      {{"p2p", "--transport", "ucx", "--iterations", "100001"},
       "--iterations: Value 100001 not in range 0 to 100000"},
      {{"p2p", "--transport", "ucx", "--iterations", "many"},
       "--iterations: Value many not in range 0 to 100000"},
      {{"p2p", "--transport", "ucx", "--repeats", "101"},
       "--repeats: Value 101 not in range 1 to 100"},
      {{"p2p", "--transport", "ucx", "--repeats", "99999999999"},
       "--repeats: Value 99999999999 not in range 1 to 100"},
      {{"kernels", "--repeats", "10001"}, "--repeats: Value 10001 not in range 1 to 10000"},
      {{"kernels", "--device", "x"}, "--device: Value x not in range 0 to 1023"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> full = {"bench"};
    full.insert(full.end(), args.begin(), args.end());
    CAPTURE(message);
    const auto r = run_conveyor(full, 10);
    CAPTURE(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(message) != std::string::npos);
    CHECK(r.out.empty());
  }
}

TEST_CASE("bench model trains on one device, then as the pipeline, and reports the efficiency") {
  const auto r = run_conveyor({"bench", "model", "--steps", "3", "--warmup", "1", "--format",
                               "json", "--set", "pipeline.stages=2", "--set",
                               "pipeline.micro_batches=4"},
                              180);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["bench"] == "model");
  CHECK(j["one_device"]["stages"] == 1);
  CHECK(j["pipeline"]["stages"] == 2);
  CHECK(j["one_device"]["tokens_per_s"].get<double>() > 0);
  CHECK(j["pipeline"]["tokens_per_s"].get<double>() > 0);
  const double efficiency = j["pipeline_efficiency"].get<double>();
  CHECK(efficiency == doctest::Approx(j["pipeline"]["tokens_per_s"].get<double>() /
                                      j["one_device"]["tokens_per_s"].get<double>()));
}

TEST_CASE("bench kernels without a GPU (or without CUDA) exits 2 saying why") {
  const auto r = run_conveyor({"bench", "kernels", "--format", "json"});
  if (r.exit_code == 0) {  // a machine with a GPU: the table is there
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["kernels"].size() > 20);
    return;
  }
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("bench kernels") != std::string::npos);
  CHECK(r.out.empty());
  const auto repeats = run_conveyor({"bench", "kernels", "--repeats", "0"});
  CHECK(repeats.exit_code == 2);
  CHECK(repeats.err.find("--repeats") != std::string::npos);
}
