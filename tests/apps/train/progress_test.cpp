// The progress display (apps/train/progress.hpp): plain lines in a file, the redrawn bar
// on a terminal; after a re-layout (issue 44) both say how many nodes and stages are live.
#include <doctest/doctest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "apps/train/progress.hpp"

using namespace conveyor;

namespace {

// What a Progress printed into a temporary file.
struct Captured {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file{std::tmpfile(), &std::fclose};
  std::string text() {
    std::fflush(file.get());
    std::rewind(file.get());
    std::string s;
    for (int c; (c = std::fgetc(file.get())) != EOF;) s += static_cast<char>(c);
    return s;
  }
};

}  // namespace

TEST_CASE("the live layout reads as counts of nodes, replicas and stages, singular for one") {
  CHECK(live_layout_text(2, 1, 2) == "2 nodes, 2 stages live");
  CHECK(live_layout_text(1, 1, 1) == "1 node, 1 stage live");
  CHECK(live_layout_text(4, 2, 2) == "4 nodes, 2 replicas × 2 stages live");
  CHECK(live_layout_text(3, 1, 3) == "3 nodes, 3 stages live");
}

TEST_CASE("progress lines say nothing of the layout until the job moves onto another, then name it on every line") {
  Captured out;
  REQUIRE(out.file);
  Progress progress(4, false, out.file.get());
  progress.step(0, 2.5, 1000);
  progress.layout(live_layout_text(2, 1, 2));
  progress.step(1, 2.4, 1000);
  progress.layout(live_layout_text(3, 1, 3));
  progress.step(3, 2.3, 1000);
  const std::string text = out.text();
  const auto line = [&](const std::string& head) {
    const auto at = text.find(head);
    return at == std::string::npos ? std::string() : text.substr(at, text.find('\n', at) - at);
  };
  CHECK(line("step 1/4").find("live") == std::string::npos);
  CHECK(line("step 2/4").ends_with("  2 nodes, 2 stages live"));
  CHECK(line("step 4/4").ends_with("  3 nodes, 3 stages live"));
}

TEST_CASE("on a terminal the redrawn bar names the live layout after a re-layout") {
  Captured out;
  REQUIRE(out.file);
  Progress progress(10, true, out.file.get());
  progress.layout(live_layout_text(1, 1, 1));
  progress.step(4, 2.0, 500);
  progress.finish();
  const std::string text = out.text();
  CHECK(text.find("step 5/10") != std::string::npos);
  CHECK(text.find("  1 node, 1 stage live\n") != std::string::npos);
}
