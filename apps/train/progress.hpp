#pragma once
// Progress of a long run on stderr: a redrawn bar on a terminal, plain log lines
// otherwise (every `every` steps and the last), so logs stay readable in files.
#include <chrono>
#include <cstdint>
#include <string>

namespace conveyor {

class Progress {
 public:
  Progress(std::int64_t total_steps, bool terminal);
  /// After train step `step` (0-based).
  void step(std::int64_t step, double loss, double tokens_per_s);
  /// A line that must not be overdrawn by the bar (evaluations, warnings).
  void note(const std::string& line);
  void finish();

 private:
  std::string bar(std::int64_t done) const;
  std::int64_t total_;
  bool terminal_;
  std::int64_t every_;
  bool bar_drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

/// True when stderr is a terminal.
bool stderr_is_terminal();

}  // namespace conveyor
