#pragma once
// Progress of a long run on stderr: a redrawn bar on a terminal, plain log lines
// otherwise (every `every` steps and the last), so logs stay readable in files. Once the
// job moved onto another layout (issue 44's shrink or grow) each says what runs now,
// "2 nodes, 2 stages live", so that a slower or faster step rate is read for what it is.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace conveyor {

class Progress {
 public:
  /// `out`: where it prints (stderr; a test's file).
  Progress(std::int64_t total_steps, bool terminal, std::FILE* out = stderr);
  /// After train step `step` (0-based).
  void step(std::int64_t step, double loss, double tokens_per_s);
  /// A line that must not be overdrawn by the bar (evaluations, warnings).
  void note(const std::string& line);
  /// The layout the job runs from now on (live_layout_text), shown with every step after.
  void layout(const std::string& live);
  void finish();

 private:
  std::string bar(std::int64_t done) const;
  std::int64_t total_;
  bool terminal_;
  std::FILE* out_;
  std::string live_;  // empty until the first re-layout
  std::int64_t every_;
  bool bar_drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

/// "3 nodes, 3 stages live", "1 node, 1 stage live", "4 nodes, 2 replicas × 2 stages live".
std::string live_layout_text(int nodes, int replicas, int stages);

/// True when stderr is a terminal.
bool stderr_is_terminal();

}  // namespace conveyor
