#include "apps/train/progress.hpp"

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>
#include <unistd.h>

namespace conveyor {
namespace {

std::string clock_text(double seconds) {
  const auto s = static_cast<std::int64_t>(std::max(0.0, seconds) + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                   : fmt::format("{}:{:02}", s / 60, s % 60);
}

std::string rate_text(double tokens_per_s) {
  return tokens_per_s >= 1e6   ? fmt::format("{:.2f}M", tokens_per_s / 1e6)
         : tokens_per_s >= 1e3 ? fmt::format("{:.1f}k", tokens_per_s / 1e3)
                               : fmt::format("{:.0f}", tokens_per_s);
}

}  // namespace

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

std::string live_layout_text(int nodes, int replicas, int stages) {
  const auto count = [](int n, const char* one) { return fmt::format("{} {}{}", n, one, n == 1 ? "" : "s"); };
  return fmt::format("{}, {}{} live", count(nodes, "node"),
                     replicas > 1 ? count(replicas, "replica") + " × " : std::string(), count(stages, "stage"));
}

Progress::Progress(std::int64_t total_steps, bool terminal, std::FILE* out)
    : total_(total_steps),
      terminal_(terminal),
      out_(out),
      every_(std::max<std::int64_t>(1, total_steps / 20)),
      start_(std::chrono::steady_clock::now()) {}

std::string Progress::bar(std::int64_t done) const {
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(kWidth * done / std::max<std::int64_t>(1, total_));
  std::string s;
  for (int i = 0; i < kWidth; ++i) s += i < filled ? "█" : "░";
  return s;
}

void Progress::step(std::int64_t step, double loss, double tokens_per_s) {
  const std::int64_t done = step + 1;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = elapsed / done * (total_ - done);
  if (terminal_) {
    fmt::print(out_, "\r\033[K{} step {}/{}  loss {:.4f}  {} tok/s  ETA {}{}{}", bar(done), done,
               total_, loss, rate_text(tokens_per_s), clock_text(eta), live_.empty() ? "" : "  ", live_);
    std::fflush(out_);
    bar_drawn_ = true;
  } else if (done % every_ == 0 || done == total_ || done == 1) {
    fmt::print(out_, "step {}/{}  loss {:.4f}  {} tok/s  elapsed {}  ETA {}{}{}\n", done, total_,
               loss, rate_text(tokens_per_s), clock_text(elapsed), clock_text(eta), live_.empty() ? "" : "  ",
               live_);
  }
}

void Progress::note(const std::string& line) {
  if (terminal_ && bar_drawn_) fmt::print(out_, "\r\033[K");
  fmt::print(out_, "{}\n", line);
  bar_drawn_ = false;
}

void Progress::layout(const std::string& live) { live_ = live; }

void Progress::finish() {
  if (terminal_ && bar_drawn_) fmt::print(out_, "\n");
  bar_drawn_ = false;
}

}  // namespace conveyor
