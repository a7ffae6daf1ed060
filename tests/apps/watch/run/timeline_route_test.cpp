// /api/timeline.svg of a traced run is the picture `conveyor trace draw` makes of its last
// traced step, byte for byte: the page shows what the command would.
#include <doctest/doctest.h>

#include "apps/watch/status_routes.hpp"
#include "tests/apps/train/train_test_support.hpp"
#include "tests/apps/watch/http_get.hpp"

using namespace conveyor::testing;
using namespace conveyor::watch;

TEST_CASE("a traced run's timeline is served as trace draw draws its last traced step") {
  TempDir dir;
  const std::string run = dir / "run";
  train_ok({"configs/tiny.yaml", "--out", run, "--set", "train.steps=3", "--set", "train.eval_every=0",
          "--set", "trace.enabled=true"});
  const auto drawn = run_conveyor({"trace", "draw", run, "--out", "-"});
  REQUIRE(drawn.exit_code == 0);
  HttpServerOptions o;
  o.log = [](std::string_view) {};
  HttpServer server(o, status_routes(std::make_shared<StatusSite>(run)));
  const auto r = http_request(server.port(), "/api/timeline.svg");
  CHECK(r.status == 200);
  CHECK(r.content_type == "image/svg+xml");
  CHECK(r.body == drawn.out);
  CHECK(r.body.find("<svg") != std::string::npos);
}
