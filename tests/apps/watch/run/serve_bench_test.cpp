// `conveyor bench serve`: a pair of tiny runs, plain and served with a page and a scraper
// attached, reported as both tokens/s, their ratio and the server thread's CPU time.
#include <doctest/doctest.h>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

TEST_CASE("bench serve trains plain and served, the served run watched, and reports the ratio") {
  const auto r = run_conveyor({"bench", "serve", "configs/tiny.yaml", "--steps", "8", "--pairs", "1", "--scrape-ms",
                               "200", "--set", "pipeline.stages=2", "--format", "json"});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("bench") == "serve");
  REQUIRE(j.at("plain_tokens_per_s").size() == 1);
  REQUIRE(j.at("served_tokens_per_s").size() == 1);
  CHECK(j.at("plain_median").get<double>() > 0);
  CHECK(j.at("served_median").get<double>() > 0);
  CHECK(j.at("ratio").get<double>() == doctest::Approx(j.at("served_median").get<double>() /
                                                       j.at("plain_median").get<double>()));
  CHECK(j.at("page_requests") == 4);  // /, page.js, page.css, chart.js
  CHECK(j.at("events").get<int>() >= 1);
  CHECK(j.at("scrapes").get<int>() >= 1);
  CHECK(j.at("client_failures") == 0);
  CHECK(j.at("server_cpu_s").get<double>() > 0);  // the named thread was found
  CHECK(j.at("server_cpu_share").get<double>() < 0.5);
}
