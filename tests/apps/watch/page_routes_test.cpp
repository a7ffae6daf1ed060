// The live page's files as the status routes serve them: the embedded page byte for byte
// as its source files, Chart.js from the path given (or 404 saying what to install), and
// 404 for every path that is not one of the served files.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "apps/watch/page_files.hpp"
#include "apps/watch/status_routes.hpp"
#include "tests/apps/watch/http_get.hpp"
#include "tests/support/temp_dir.hpp"

using namespace conveyor::watch;
using conveyor::testing::http_request;
using conveyor::testing::TempDir;

namespace {

std::string source_file(const std::string& name) {
  std::ifstream in(std::string(CONVEYOR_SOURCE_DIR) + "/apps/watch/page/" + name, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

HttpServerOptions quiet() {
  HttpServerOptions o;
  o.log = [](std::string_view) {};
  return o;
}

}  // namespace

TEST_CASE("the embedded page files are the source files byte for byte") {
  REQUIRE(page_files().size() == 3);
  for (const char* name : {"index.html", "page.js", "page.css"}) {
    CAPTURE(name);
    const auto* f = find_page_file(name);
    REQUIRE(f != nullptr);
    CHECK(f->text == source_file(name));
  }
  CHECK(find_page_file("chart.js") == nullptr);
  CHECK(page_content_type("page.js") == "text/javascript; charset=utf-8");
}

TEST_CASE("the server serves the page, its script and style, and Chart.js from the configured file") {
  TempDir dir;
  const std::string chart = dir / "chart.min.js";
  std::ofstream(chart) << "window.Chart = function () {};\n";
  HttpServer server(quiet(), status_routes(std::make_shared<StatusSite>(dir.path(), chart)));
  const auto page = http_request(server.port(), "/");
  CHECK(page.status == 200);
  CHECK(page.content_type == "text/html; charset=utf-8");
  CHECK(page.body == source_file("index.html"));
  CHECK(page.body.find("src=\"/static/chart.js\"") != std::string::npos);
  CHECK(page.body.find("http://") == std::string::npos);  // nothing from another host
  CHECK(page.body.find("https://") == std::string::npos);
  const auto js = http_request(server.port(), "/static/page.js");
  CHECK(js.status == 200);
  CHECK(js.content_type == "text/javascript; charset=utf-8");
  CHECK(js.body == source_file("page.js"));
  CHECK(http_request(server.port(), "/static/page.css").content_type == "text/css; charset=utf-8");
  const auto c = http_request(server.port(), "/static/chart.js");
  CHECK(c.status == 200);
  CHECK(c.body == "window.Chart = function () {};\n");
}

TEST_CASE("without Chart.js its path is 404 naming the file and the package, and the page still loads") {
  TempDir dir;
  const std::string missing = dir / "no-chart.js";
  HttpServer server(quiet(), status_routes(std::make_shared<StatusSite>(dir.path(), missing)));
  const auto c = http_request(server.port(), "/static/chart.js");
  CHECK(c.status == 404);
  CHECK(c.body.find(missing) != std::string::npos);
  CHECK(c.body.find("libjs-chart.js") != std::string::npos);
  CHECK(c.body.find("CONVEYOR_CHART_JS") != std::string::npos);
  CHECK(http_request(server.port(), "/").status == 200);
  // Installed later: the next request finds it.
  std::ofstream(missing) << "x";
  CHECK(http_request(server.port(), "/static/chart.js").status == 200);
}

TEST_CASE("every path outside the served files is 404, however it is spelled") {
  TempDir dir;
  std::ofstream(dir / "config.yaml") << "train: {steps: 3}\n";
  HttpServer server(quiet(), status_routes(std::make_shared<StatusSite>(dir.path(), dir / "chart.js")));
  for (const char* path : {"/config.yaml", "/../config.yaml", "/static/../config.yaml", "/static/%2e%2e/config.yaml",
                           "/static/", "/static", "/static/page.js/", "/static/./page.js", "/static//page.js",
                           "/static/PAGE.JS", "/page.js", "/etc/passwd", "/api", "/api/timeline"}) {
    CAPTURE(path);
    CHECK(http_request(server.port(), path).status == 404);
  }
}

TEST_CASE("a run that is not traced has no timeline, and the 404 says how to get one") {
  TempDir dir;
  HttpServer server(quiet(), status_routes(std::make_shared<StatusSite>(dir.path(), dir / "chart.js")));
  const auto r = http_request(server.port(), "/api/timeline.svg");
  CHECK(r.status == 404);
  CHECK(r.body.find("trace.enabled: true") != std::string::npos);
}
