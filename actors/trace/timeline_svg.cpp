#include "actors/trace/timeline_svg.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "actors/plan/schedule/action.hpp"
#include "actors/trace/trace_rounds.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::trace {
namespace {

constexpr double kLeft = 80, kTop = 40, kBottom = 50, kRight = 20;

const char* colour(const std::string& kind) {
  if (kind == "F") return "#4e79a7";
  if (kind == "B") return "#59a14f";
  if (kind == "I") return "#f28e2b";
  if (kind == "W") return "#b07aa1";
  return "#999999";
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

double nice_tick(double span_ms) {
  const double raw = span_ms / 8;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

}  // namespace

TimelineLayout layout_timeline(const TraceSet& set, const TimelineOptions& o) {
  TimelineLayout l;
  const auto rounds = split_rounds(set, stage_count(set));
  std::vector<const Round*> chosen;
  for (const auto& [n, r] : rounds)
    if ((!r.eval || o.include_eval) && (!o.steps_given || o.steps.contains(r.step))) chosen.push_back(&r);
  if (!o.steps_given) {  // the last train step
    const Round* last = nullptr;
    for (const auto& [n, r] : rounds)
      if (!r.eval) last = &r;
    chosen.clear();
    if (last) chosen.push_back(last);
  }
  if (chosen.empty())
    throw InputError(fmt::format("trace: no {} in the trace to draw",
                                 o.steps_given ? "action of steps " + o.steps.str() : std::string("train step")));
  std::int64_t t0 = chosen.front()->first_start, t1 = chosen.front()->last_end;
  for (const Round* r : chosen) t0 = std::min(t0, r->first_start), t1 = std::max(t1, r->last_end);
  // Rows: the stage actors of the layouts that ran the rounds drawn (issue 44: a shrunk
  // layout has fewer), not of the largest one the run had.
  for (const Round* r : chosen) l.stages = std::max(l.stages, stage_count(set, *r));
  l.t0_ms = 0;
  l.t1_ms = static_cast<double>(t1 - t0) / 1e6;
  l.width = o.width_px;
  l.height = kTop + o.row_px * l.stages + kBottom;
  const double plot = o.width_px - kLeft - kRight;
  const double scale = plot / std::max<double>(1.0, static_cast<double>(t1 - t0));  // px per ns
  for (const Round* r : chosen) {
    const TracePlans* plans = set.layout(r->generation);
    const bool chunks = plans && plans->train.chunks_per_rank() > 1;
    l.markers.emplace_back(kLeft + scale * static_cast<double>(r->first_start - t0),
                           fmt::format("{}step {}", r->eval ? "eval " : "", r->step));
    for (const auto& stage : r->actions)
      for (std::size_t i : stage) {
        const Record& rec = set.records[i];
        TimelineBox b;
        b.stage = rec.stage;
        b.x = kLeft + scale * static_cast<double>(rec.start_ns - t0);
        b.width = std::max(0.5, scale * static_cast<double>(rec.end_ns - rec.start_ns));
        b.kind = std::string(sched::kind_name(static_cast<sched::ActionKind>(rec.action)));
        b.label = std::to_string(rec.micro_batch) + (chunks ? fmt::format("c{}", rec.chunk) : "");
        l.boxes.push_back(std::move(b));
      }
  }
  // A change of layout between the rounds drawn: a marker where the new layout starts.
  for (const auto& sw : set.switches) {
    const Record& rec = set.records[sw.record];
    if (rec.end_ns < t0 || rec.end_ns > t1) continue;
    l.markers.emplace_back(kLeft + scale * static_cast<double>(rec.end_ns - t0),
                           sw.joined ? fmt::format("joined: node {}", sw.node)
                                     : fmt::format("replan: node {} lost", sw.node));
  }
  l.title = chosen.size() == 1
                ? fmt::format("{}step {}: {:.3f} ms", chosen.front()->eval ? "eval " : "",
                              chosen.front()->step, l.t1_ms)
                : fmt::format("steps {}-{}: {:.3f} ms", chosen.front()->step, chosen.back()->step, l.t1_ms);
  if (!set.switches.empty()) {
    const int first = chosen.front()->generation, last = chosen.back()->generation;
    l.title += first == last ? fmt::format(" (layout generation {}, {} stage actors)", first, l.stages)
                             : fmt::format(" (layout generations {}-{})", first, last);
  }
  return l;
}

std::string render_svg(const TimelineLayout& l) {
  const double row = (l.height - kTop - kBottom) / std::max(1, l.stages);
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" "
      "viewBox=\"0 0 {0:.0f} {1:.0f}\" font-family=\"sans-serif\" font-size=\"11\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"20\" font-size=\"14\">{3}</text>\n",
      l.width, l.height, kLeft, escape(l.title));
  // Legend.
  double lx = l.width - kRight - 300;
  for (const char* k : {"F", "B", "I", "W"}) {
    s += fmt::format("<rect x=\"{:.1f}\" y=\"10\" width=\"12\" height=\"12\" fill=\"{}\"/>"
                     "<text x=\"{:.1f}\" y=\"20\">{}</text>\n", lx, colour(k), lx + 16, k);
    lx += 45;
  }
  s += fmt::format("<rect x=\"{:.1f}\" y=\"10\" width=\"12\" height=\"12\" fill=\"#e6e6e6\"/>"
                   "<text x=\"{:.1f}\" y=\"20\">bubble</text>\n", lx, lx + 16);
  const double plot_w = l.width - kLeft - kRight;
  for (int st = 0; st < l.stages; ++st) {
    const double y = kTop + st * row;
    s += fmt::format("<text x=\"10\" y=\"{:.1f}\">stage {}</text>\n", y + row * 0.65, st);
    s += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#e6e6e6\"/>\n",
                     kLeft, y + 2, plot_w, row - 4);
  }
  for (const auto& b : l.boxes) {
    const double y = kTop + b.stage * row;
    s += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"{}\" "
                     "stroke=\"white\" stroke-width=\"0.5\"><title>{}{}</title></rect>\n",
                     b.x, y + 2, b.width, row - 4, colour(b.kind), b.kind, escape(b.label));
    if (b.width >= 14)
      s += fmt::format("<text x=\"{:.2f}\" y=\"{:.1f}\" fill=\"white\" text-anchor=\"middle\">{}</text>\n",
                       b.x + b.width / 2, y + row * 0.65, escape(b.label));
  }
  for (const auto& [x, text] : l.markers)
    s += fmt::format("<line x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2:.1f}\" stroke=\"#555\" "
                     "stroke-dasharray=\"4 3\"/>\n",
                     x, kTop - 6, l.height - kBottom);
  // Axis in ms.
  const double axis_y = l.height - kBottom + 8;
  s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"black\"/>\n",
                   kLeft, axis_y, kLeft + plot_w, axis_y);
  if (l.t1_ms > 0) {
    const double tick = nice_tick(l.t1_ms);
    for (double t = 0; t <= l.t1_ms + 1e-9; t += tick) {
      const double x = kLeft + plot_w * t / l.t1_ms;
      s += fmt::format("<line x1=\"{0:.2f}\" y1=\"{1:.1f}\" x2=\"{0:.2f}\" y2=\"{2:.1f}\" stroke=\"black\"/>"
                       "<text x=\"{0:.2f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4:g}</text>\n",
                       x, axis_y, axis_y + 5, axis_y + 18, t);
    }
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">ms</text>\n", kLeft + plot_w,
                     axis_y + 34);
  }
  s += "</svg>\n";
  return s;
}

}  // namespace conveyor::trace
