// conveyor trace export DIR --chrome OUT.json
// conveyor trace summary DIR [--format text|json]
// conveyor trace check DIR [--format text|json]
// conveyor trace draw DIR --out TIMELINE.svg [--steps A-B] [--eval]
// DIR is a run folder of a traced run (trace.enabled: true) or its trace/ folder.
// Bad input (missing, truncated, corrupt trace, wrong version) is one `error:` line and
// exit code 2; `trace check` exits 1 when it finds something, after listing it.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <string>

#include "actors/trace/chrome_export.hpp"
#include "actors/trace/timeline_svg.hpp"
#include "actors/trace/trace_check.hpp"
#include "actors/trace/trace_summary.hpp"
#include "apps/commands.hpp"
#include "apps/train/run_dir.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

constexpr int kExitFindings = 1;

struct TraceOptions {
  std::string dir;
  std::string chrome;
  std::string out;
  std::string format = "text";
  std::string steps;
  bool eval = false;
};

// The trace's own files are never an output: writing one would destroy what was analysed.
void refuse_inputs(const std::string& path, const trace::TraceSet& set) {
  std::error_code ec;
  for (const auto& input : set.inputs)
    if (std::filesystem::equivalent(path, input, ec))
      throw InputError(fmt::format("{}: is one of the trace's own files ({}): choose another output",
                                   path, input.filename().string()));
  if (std::filesystem::path(path).extension() == trace::kTraceExtension)
    throw InputError(fmt::format("{}: a {} name would be read as a trace file: choose another name", path,
                                 trace::kTraceExtension));
}

void write_output(const std::string& path, const std::string& text) {
  if (path == "-") {  // standard output (checked at exit: a closed pipe is an error)
    fmt::print("{}", text);
    return;
  }
  try {
    write_file_atomically(path, text);
  } catch (const std::runtime_error& e) {
    throw InputError(e.what());
  }
}

void run_export(const TraceOptions& o) {
  const auto set = trace::load_trace_dir(o.dir);
  refuse_inputs(o.chrome, set);
  // Replace: a host name in a trace header need not be UTF-8.
  write_output(o.chrome, trace::chrome_trace(set).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  fmt::print(stderr, "conveyor trace: {} records from {} process(es) → {}\n", set.records.size(),
             set.hosts.size(), o.chrome);
}

void run_summary(const TraceOptions& o) {
  // A run that changed layout (issue 44): one summary per layout, each under a line naming it.
  const auto summary = trace::summarize_layouts(trace::load_trace_dir(o.dir));
  if (o.format == "json")
    fmt::print("{}\n", trace::summary_json(summary).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  else
    fmt::print("{}", trace::summary_text(summary));
}

void run_check(const TraceOptions& o) {
  const auto result = trace::check_trace(trace::load_trace_dir(o.dir));
  if (o.format == "json") {
    nlohmann::json findings = nlohmann::json::array();
    for (const auto& f : result.findings) findings.push_back({{"kind", f.kind}, {"message", f.message}});
    fmt::print("{}\n", nlohmann::json{{"ok", result.ok()},
                                      {"rounds_checked", result.rounds_checked},
                                      {"messages_checked", result.messages_checked},
                                      {"order_checked", result.order_checked},
                                      {"findings", findings},
                                      {"notes", result.notes}}
                           .dump());
  } else {
    for (const auto& n : result.notes) fmt::print("note: {}\n", n);
    for (const auto& f : result.findings) fmt::print("{}: {}\n", f.kind, f.message);
    fmt::print("{}: {} rounds{}, {} messages checked; {} finding(s)\n",
               result.ok() ? "ok" : "FAILED", result.rounds_checked,
               result.order_checked ? "" : " (no schedule.json: order not checked)",
               result.messages_checked, result.findings.size());
  }
  if (!result.ok()) {
    // The listing is the answer; the exit status says it found something (not bad input).
    std::fflush(stdout);
    std::exit(kExitFindings);
  }
}

void run_draw(const TraceOptions& o) {
  trace::TimelineOptions t;
  if (!o.steps.empty()) {
    auto range = trace::StepRange::parse(o.steps);
    if (!range) throw InputError(fmt::format("--steps {}: expected N or A-B with 0 <= A <= B", o.steps));
    t.steps = *range;
    t.steps_given = true;
  }
  t.include_eval = o.eval;
  const auto set = trace::load_trace_dir(o.dir);
  refuse_inputs(o.out, set);
  const auto layout = trace::layout_timeline(set, t);
  write_output(o.out, trace::render_svg(layout));
  fmt::print(stderr, "conveyor trace: {} ({} actions) → {}\n", layout.title, layout.boxes.size(), o.out);
}

}  // namespace

void add_trace_command(CLI::App& app) {
  auto* trace = app.add_subcommand("trace", "Analyse a traced run: export, summary, check, draw");
  trace->require_subcommand(1);
  auto opt = std::make_shared<TraceOptions>();
  auto add_dir = [&](CLI::App* cmd) {
    cmd->add_option("dir", opt->dir, "Run folder of a traced run (or its trace/ folder)")->required();
  };
  auto add_format = [&](CLI::App* cmd) {
    cmd->add_option("--format", opt->format, "text, or json (alone on stdout)")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
  };

  auto* exp = trace->add_subcommand("export", "Write the trace as Chrome trace-event JSON (Perfetto, chrome://tracing)");
  add_dir(exp);
  exp->add_option("--chrome", opt->chrome, "Output file (trace-event JSON; - for standard output)")->required();
  exp->callback([opt] { run_export(*opt); });

  auto* sum = trace->add_subcommand(
      "summary", "Per stage busy, idle and bubble; communication; critical path; simulator beside it");
  add_dir(sum);
  add_format(sum);
  sum->callback([opt] { run_summary(*opt); });

  auto* chk = trace->add_subcommand(
      "check", "Executed order against the schedule, unmatched messages, out-of-order arrivals");
  add_dir(chk);
  add_format(chk);
  chk->callback([opt] { run_check(*opt); });

  auto* draw = trace->add_subcommand("draw", "Draw the pipeline timeline as SVG");
  add_dir(draw);
  draw->add_option("--out", opt->out, "Output SVG file (written atomically; - for standard output)")->required();
  draw->add_option("--steps", opt->steps, "Train steps to draw: N or A-B (default: the last traced)");
  draw->add_flag("--eval", opt->eval, "Draw evaluation rounds of those steps too");
  draw->callback([opt] { run_draw(*opt); });
}

}  // namespace conveyor
