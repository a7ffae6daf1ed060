#include "apps/watch/status_page.hpp"

#include <fmt/format.h>

namespace conveyor::watch {
namespace {

std::string number(const std::optional<double>& v, const char* format = "{:.4g}") {
  return v ? fmt::format(fmt::runtime(format), *v) : std::string("–");
}

std::string row(std::string_view name, const std::string& value) {
  return fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", html_escape(name), html_escape(value));
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string status_page(const RunStatus& s) {
  const auto& st = s.last_step;
  const auto of_step = [&](double StepStatus::*field) {
    return st ? std::optional<double>((*st).*field) : std::nullopt;
  };
  std::string job = fmt::format("{} stages, {}", s.pipeline_stages, s.schedule.empty() ? "?" : s.schedule);
  if (s.layers && s.d_model) job = fmt::format("{} layers, d_model {}; {}", *s.layers, *s.d_model, job);
  std::string recoveries;
  for (const auto& [kind, n] : s.recoveries) recoveries += fmt::format("{}{} {}", recoveries.empty() ? "" : ", ", n, kind);
  std::string html =
      "<!doctype html>\n<html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"5\">\n"
      "<title>conveyor run</title>\n"
      "<style>body{font-family:sans-serif;margin:2em}th{text-align:left;padding-right:1em}"
      "td,th{padding:2px 8px}</style></head><body>\n"
      "<h1>conveyor run</h1>\n"
      "<p><em>A minimal page, reloaded every 5 s; the live page with charts is still to come.</em> "
      "<a href=\"/metrics\">/metrics</a> · <a href=\"/api/status\">/api/status</a></p>\n<table>\n";
  html += row("state", std::string(run_state_name(s.state)));
  html += row("job", job);
  html += row("step", s.total_steps ? fmt::format("{} of {}", s.steps_done(), *s.total_steps)
                                    : std::to_string(s.steps_done()));
  html += row("ETA", s.eta_seconds() ? fmt::format("{:.0f} s", *s.eta_seconds()) : "–");
  html += row("loss", number(of_step(&StepStatus::loss)));
  html += row("eval loss", number(s.eval_loss));
  html += row("tokens/s", number(of_step(&StepStatus::tokens_per_s), "{:.0f}"));
  html += row("MFU", s.model_flops_utilization() ? fmt::format("{:.1f}%", 100 * *s.model_flops_utilization()) : "–");
  html += row("bubble (last step)", st ? fmt::format("{:.1f}%", 100 * st->bubble) : "–");
  html += row("bubble (simulated)", s.simulated_bubble ? fmt::format("{:.1f}%", 100 * *s.simulated_bubble) : "–");
  html += row("recoveries", recoveries.empty() ? "none" : recoveries);
  html += row("checkpoints", s.last_checkpoint ? fmt::format("{} (last: step {}, {:.2f} s)", s.checkpoints,
                                                             s.last_checkpoint->step, s.last_checkpoint->seconds)
                                               : std::to_string(s.checkpoints));
  html += "</table>\n<h2>stages</h2>\n<table>\n<tr><th>stage</th><th>device</th><th>node</th><th>busy</th></tr>\n";
  for (const auto& stage : s.stages)
    html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", stage.stage,
                        html_escape(stage.device), stage.node,
                        stage.busy_ratio ? fmt::format("{:.0f}%", 100 * *stage.busy_ratio) : "–");
  html += "</table>\n</body></html>\n";
  return html;
}

}  // namespace conveyor::watch
