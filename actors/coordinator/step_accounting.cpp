#include "actors/coordinator/step_accounting.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>

#include "kernels/model/param_layout.hpp"

namespace conveyor {

double mean_loss(const std::vector<StageReport>& reports, int micro_batches) {
  std::vector<double> by_mb(micro_batches, std::numeric_limits<double>::quiet_NaN());
  int seen = 0;
  for (const auto& r : reports)
    for (const auto& [mb, loss] : r.losses) {
      if (mb < 0 || mb >= micro_batches || !std::isnan(by_mb[mb]))
        throw std::logic_error("mean_loss: unexpected loss for micro-batch " + std::to_string(mb));
      by_mb[mb] = loss;
      ++seen;
    }
  if (seen != micro_batches)
    throw std::logic_error("mean_loss: " + std::to_string(seen) + " losses for " +
                           std::to_string(micro_batches) + " micro-batches");
  double sum = 0.0;
  for (double l : by_mb) sum += l;
  return sum / micro_batches;
}

namespace {

// The norm over the reports `counts` accepts.
template <class Counts>
double grad_norm_of(const std::vector<StageReport>& reports, Counts counts) {
  std::vector<const ModelStageGradSquares*> stages;
  for (const auto& r : reports)
    if (counts(r))
      for (const auto& g : r.grad_squares) stages.push_back(&g);
  std::sort(stages.begin(), stages.end(),
            [](auto* a, auto* b) { return a->model_stage < b->model_stage; });
  double sum = 0.0;
  for (const auto* g : stages)
    for (double s : g->squares) sum += s;
  return std::sqrt(sum);
}

}  // namespace

double global_grad_norm(const std::vector<StageReport>& reports) {
  return grad_norm_of(reports, [](const StageReport&) { return true; });
}

double global_grad_norm(const std::vector<StageReport>& reports, const ReplicaLayout& layout) {
  return grad_norm_of(reports,
                      [&](const StageReport& r) { return layout.replica_of(r.rank) == 0; });
}

std::vector<int> nonfinite_ranks(const std::vector<StageReport>& reports) {
  std::vector<int> ranks;
  for (const auto& r : reports) {
    bool bad = false;
    for (const auto& [mb, loss] : r.losses) bad = bad || !std::isfinite(loss);
    for (const auto& g : r.grad_squares)
      for (double s : g.squares) bad = bad || !std::isfinite(s);
    if (bad) ranks.push_back(r.rank);
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

std::vector<std::string> nonfinite_params(const std::vector<StageReport>& reports,
                                          const GptConfig& model, const Placement& placement) {
  std::map<std::pair<int, std::size_t>, std::string> found;  // (model stage, parameter)
  for (const auto& r : reports)
    for (const auto& g : r.grad_squares) {
      std::vector<ParamLayout> layout;
      for (std::size_t i = 0; i < g.squares.size(); ++i) {
        if (std::isfinite(g.squares[i])) continue;
        if (layout.empty())
          layout = stage_param_layout(model, placement.chunk_of(g.model_stage).slice);
        found.emplace(std::pair{g.model_stage, i},
                      i < layout.size() ? layout[i].name : "parameter " + std::to_string(i));
      }
    }
  std::vector<std::string> names;
  for (auto& [where, name] : found) names.push_back(std::move(name));
  return names;
}

MeasuredBubble measure_bubble(const std::vector<StageReport>& reports, int ranks) {
  MeasuredBubble m;
  m.busy_ms.assign(ranks, 0.0);
  std::int64_t first = std::numeric_limits<std::int64_t>::max(), last = 0;
  for (const auto& r : reports)
    for (const auto& t : r.timings) {
      if (r.rank >= 0 && r.rank < ranks) m.busy_ms[r.rank] += (t.end_ns - t.start_ns) / 1e6;
      first = std::min(first, t.start_ns);
      last = std::max(last, t.end_ns);
    }
  if (last <= first) return m;
  m.span_ms = (last - first) / 1e6;
  double busy = 0.0;
  for (double b : m.busy_ms) busy += b;
  m.bubble = std::clamp(1.0 - busy / (ranks * m.span_ms), 0.0, 1.0);
  return m;
}

ReductionCost reduction_cost(const std::vector<StageReport>& reports) {
  ReductionCost cost;
  if (reports.empty()) return cost;
  for (const auto& r : reports) {
    cost.busy_ms += r.allreduce_busy_ms;
    cost.exposed_ms += r.allreduce_exposed_ms;
  }
  cost.busy_ms /= static_cast<double>(reports.size());
  cost.exposed_ms /= static_cast<double>(reports.size());
  return cost;
}

}  // namespace conveyor
