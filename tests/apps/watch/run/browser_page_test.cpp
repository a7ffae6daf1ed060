// The live page in a real browser: headless Chromium (Debian's chromium) opens the page of
// a tiny job while it trains, and the test waits, through the DevTools protocol, until the
// loss chart has points and the step counter has moved on; the stage rows must be the
// plan's; a screenshot is kept under the build folder (test-artifacts/watch_page.png).
// A second page, over a folder written by train's writers, shows a sample and a recovery
// as text. Without chromium the tests say "skipped: no chromium" and pass.
#include <doctest/doctest.h>

#include <iostream>

#include "apps/watch/chart_js.hpp"
#include "apps/watch/status_server.hpp"
#include "tests/apps/watch/run/headless_chromium.hpp"
#include "tests/apps/watch/run/installed_tool.hpp"
#include "tests/apps/watch/run/run_fixture.hpp"
#include "tests/apps/watch/run/served_job.hpp"

using namespace conveyor::testing;

namespace {

int number_in(HeadlessChromium& page, const std::string& expression) {
  const auto v = page.evaluate("Number(" + expression + ")");
  return v.is_number() ? v.get<int>() : -1;
}

fs::path artifact_dir() {
  const fs::path dir = fs::path(CONVEYOR_BINARY).parent_path() / "test-artifacts";
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("the live page of a training job draws the loss, advances the step and lists the plan's stages") {
  CONVEYOR_REQUIRE_TOOL(chromium, "chromium", "chromium", "/usr/bin/chromium",
                        "/usr/bin/chromium-browser", "/usr/bin/google-chrome");
  TempDir dir;
  // Traced, so the page shows a timeline; evaluated often, so the eval curve has points.
  ServedJob job(dir.path(), {"train.eval_every=20", "train.eval_batches=1", "trace.enabled=true"});
  REQUIRE(job.port != 0);
  REQUIRE(job.wait_for_steps(2));
  HeadlessChromium page(chromium, dir.path() / "chromium");
  page.navigate("http://127.0.0.1:" + std::to_string(job.port) + "/");

  // 1. the loss chart has points (the first event came over /api/events)
  const bool drawn = page.wait_until(
      "Number(document.getElementById('loss-chart').dataset.points) > 0", std::chrono::seconds(30));
  INFO("chromium: " << page.stderr_text());
  REQUIRE(drawn);
  const int first_step = number_in(page, "document.getElementById('step').dataset.step");
  CHECK(first_step >= 2);

  // 2. the counter advances without a reload: later events re-render the page
  CHECK(page.wait_until("Number(document.getElementById('step').dataset.step) > " + std::to_string(first_step),
                        std::chrono::seconds(30)));
  CHECK(number_in(page, "document.body.dataset.updates") >= 2);
  CHECK(page.evaluate("document.body.dataset.connection") == "open");

  // 3. one row per stage actor of plan.json: its rank, device and node
  const auto rows = page.evaluate(
      "JSON.stringify([...document.querySelectorAll('#stages tbody tr')].map("
      "r => [Number(r.dataset.stage), r.dataset.device, Number(r.dataset.node)]))");
  REQUIRE(rows.is_string());
  nlohmann::json expected = nlohmann::json::array();
  const auto plan = nlohmann::json::parse(read_text(job.run / "plan.json"));
  for (const auto& replica : plan.at("replicas"))
    for (const auto& actor : replica.at("stages"))
      expected.push_back({actor.at("stage"), actor.at("device"), actor.value("node", 0)});
  CHECK(nlohmann::json::parse(rows.get<std::string>()) == expected);
  CHECK(expected.size() == 4);

  // 4. Chart.js came from this server when Debian's package is there; else the page says why
  const bool have_chart_js = fs::exists(conveyor::watch::chart_js_path());
  CHECK(page.evaluate("document.getElementById('chart-status').dataset.chart") == (have_chart_js ? "ok" : "missing"));
  if (have_chart_js)  // Chart.js drew into the canvas: it sized it and kept its chart object
    CHECK(page.evaluate("window.Chart.getChart(document.getElementById('loss-chart')).data.datasets[0].data.length > 0") ==
          true);

  // 5. the timeline of a traced step, the eval curve, then the picture for people
  CHECK(page.wait_until("!document.getElementById('timeline').hidden && "
                        "document.getElementById('timeline').naturalWidth > 0",
                        std::chrono::seconds(30)));
  CHECK(page.wait_until("Number(document.getElementById('loss-chart').dataset.evalPoints) > 0",
                        std::chrono::seconds(30)));
  const fs::path png = artifact_dir() / "watch_page.png";
  page.screenshot(png);
  const std::string bytes = read_text(png);
  CHECK(bytes.size() > 10000);
  CHECK(bytes.starts_with("\x89PNG\r\n\x1a\n"));
  MESSAGE("screenshot: " << png.string());

  const int status = job.stop();
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("the live page shows the latest sample and the recovery events as text, markup and all") {
  CONVEYOR_REQUIRE_TOOL(chromium, "chromium", "chromium", "/usr/bin/chromium",
                        "/usr/bin/chromium-browser", "/usr/bin/google-chrome");
  TempDir dir;
  const fs::path run = dir.path() / "run";
  fs::create_directories(run);
  RunFixture fixture(run);
  fixture.step(0);
  fixture.crash(1);
  fixture.step(1);
  // A model may write anything: markup in a sample must show as the characters it is.
  const std::string text = "<img src=x onerror=\"document.body.dataset.injected=1\"> & the <b>end</b>";
  fixture.event({{"event", "sample"}, {"step", 1}, {"text", text}});
  const auto server = conveyor::watch::start_status_server(conveyor::watch::status_server_spec("--serve", "0"), run,
                                                           "test");
  HeadlessChromium page(chromium, dir.path() / "chromium");
  page.navigate(server->url());
  REQUIRE(page.wait_until("!document.getElementById('sample').hidden", std::chrono::seconds(30)));
  CHECK(page.evaluate("document.getElementById('sample').textContent") == text);
  CHECK(page.evaluate("document.getElementById('sample').dataset.step") == "1");
  CHECK(page.evaluate("document.body.dataset.injected === undefined") == true);
  CHECK(page.evaluate("document.querySelectorAll('#sample *').length") == 0);  // no element made from it
  CHECK(page.evaluate("document.querySelector('#events tbody tr').dataset.kind") == "recovery: crash");
  CHECK(page.evaluate("document.getElementById('events').hidden") == false);
}
