#pragma once
// `conveyor trace draw`: the pipeline timeline as an SVG picture, written as text (the
// format is simple). Stages are rows; each action a box coloured by kind (F blue, B
// green, I orange, W purple) labelled with its micro-batch; a row's background is the
// bubble colour, so idle time shows as grey gaps; dashed lines mark round starts (and a
// change of layout, issue 44: rows are the stage actors of the layouts drawn); an
// axis in ms along the bottom. Pure: the layout is computed from the records.
#include <cstdint>
#include <string>
#include <vector>

#include "actors/trace/step_range.hpp"
#include "actors/trace/trace_set.hpp"

namespace conveyor::trace {

struct TimelineOptions {
  StepRange steps{};        // which train steps to draw (default: the last one traced)
  bool steps_given = false;
  bool include_eval = false;
  double width_px = 1200;
  double row_px = 28;
};

struct TimelineBox {
  int stage = 0;
  double x = 0, width = 0;  // px
  std::string kind;         // F, B, I, W
  std::string label;        // micro-batch (and chunk)
};

struct TimelineLayout {
  int stages = 0;
  double width = 0, height = 0;
  double t0_ms = 0, t1_ms = 0;
  std::vector<TimelineBox> boxes;
  std::vector<std::pair<double, std::string>> markers;  // round starts: x, text
  std::string title;
};

/// Throws InputError when no action falls in the chosen steps.
TimelineLayout layout_timeline(const TraceSet& set, const TimelineOptions& options);
std::string render_svg(const TimelineLayout& layout);

}  // namespace conveyor::trace
