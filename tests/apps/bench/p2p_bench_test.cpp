// `conveyor bench p2p`: the UCX channel against a raw UCX ping-pong on loopback (runs on
// any machine), GPU transports refused with exit 2 where there are no GPUs, bad sizes.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "apps/bench/p2p_bench.hpp"
#include "kernels/common/error.hpp"
#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

TEST_CASE("bench p2p measures the ucx channel against a raw UCX ping-pong in the same run") {
  const auto r = run_conveyor({"bench", "p2p", "--transport", "ucx", "--sizes", "4KiB,64KiB",
                               "--iterations", "20", "--repeats", "1", "--format", "json"},
                              120);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);  // stdout is the JSON document alone
  CHECK(j["bench"] == "p2p");
  REQUIRE(j["results"].size() == 2);
  CHECK(j["results"][0]["bytes"] == 4096);
  CHECK(j["results"][1]["bytes"] == 65536);
  for (const auto& row : j["results"]) {
    CHECK(row["transport"] == "ucx");
    CHECK(row["iterations"] == 20);
    CHECK(row["channel_us"].get<double>() > 0);
    CHECK(row["raw_us"].get<double>() > 0);
    CHECK(row["channel_gbs"].get<double>() > 0);
    CHECK(row["ratio"].get<double>() > 0);
  }
}

TEST_CASE("bench p2p prints a table with the ratio to the raw reference") {
  const auto r = run_conveyor(
      {"bench", "p2p", "--transport", "ucx", "--sizes", "8KiB", "--iterations", "10", "--repeats", "1"}, 120);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("ucx") != std::string::npos);
  CHECK(r.out.find("8KiB") != std::string::npos);
  CHECK(r.out.find("ratio") != std::string::npos);
}

TEST_CASE("bench p2p asked for a GPU transport where there are no GPUs exits 2") {
  // Which GPU transports can run here: "all" lists the others under "skipped".
  const auto all = run_conveyor({"bench", "p2p", "--sizes", "4KiB", "--iterations", "2",
                                 "--repeats", "1", "--format", "json"},
                                300);
  REQUIRE(all.exit_code == 0);
  const auto skipped = nlohmann::json::parse(all.out)["skipped"];
  if (skipped.empty()) {
    MESSAGE("skipped: this machine has the GPUs for every transport");
    return;
  }
  for (const std::string kind : {"nccl", "cuda-peer"}) {
    CAPTURE(kind);
    const auto r = run_conveyor({"bench", "p2p", "--transport", kind, "--format", "json"});
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.rfind("error: ", 0) == 0);
    CHECK(r.err.find("--transport " + kind) != std::string::npos);
    CHECK(r.err.find("2 GPUs") != std::string::npos);
  }
}

TEST_CASE("bench p2p with a bad size or transport exits 2 naming the flag") {
  for (const std::string size : {"3", "0", "8KB", "2GiB", "MiB"}) {
    CAPTURE(size);
    const auto r = run_conveyor({"bench", "p2p", "--transport", "ucx", "--sizes", size});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--sizes") != std::string::npos);
    CHECK(r.out.empty());
  }
  const auto t = run_conveyor({"bench", "p2p", "--transport", "tcp"});
  CHECK(t.exit_code == 2);
  CHECK(t.err.find("--transport") != std::string::npos);
}

TEST_CASE("p2p sizes read with binary units") {
  CHECK(conveyor::parse_p2p_size("8KiB") == 8192);
  CHECK(conveyor::parse_p2p_size("16MiB") == (std::size_t{16} << 20));
  CHECK(conveyor::parse_p2p_size("4096") == 4096);
  CHECK(conveyor::parse_p2p_size("12B") == 12);
  CHECK_THROWS_AS(conveyor::parse_p2p_size("6"), conveyor::InputError);
}
