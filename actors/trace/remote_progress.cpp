#include "actors/trace/remote_progress.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace conveyor::trace {

std::vector<RemoteStageProgress> progress_report(const ProgressBoard& board,
                                                 const std::vector<int>& ranks, std::int64_t now_ns) {
  std::vector<RemoteStageProgress> out;
  out.reserve(ranks.size());
  const auto all = board.snapshot();
  for (int r : ranks) {
    const StageSnapshot& s = all.at(static_cast<std::size_t>(r));
    RemoteStageProgress p;
    p.rank = r;
    p.state = static_cast<std::uint8_t>(s.state);
    p.round = s.round;
    p.step = s.step;
    p.eval = s.eval;
    p.slot = s.slot;
    p.age_ns = s.since_ns == 0 ? -1 : std::max<std::int64_t>(0, now_ns - s.since_ns);
    p.first_micro_batch = s.first_micro_batch;
    out.push_back(p);
  }
  return out;
}

std::optional<std::string> apply_progress_report(ProgressBoard& board, int node,
                                                 const std::vector<int>& node_ranks,
                                                 const std::vector<RemoteStageProgress>& report,
                                                 std::int64_t now_ns) {
  constexpr auto kLastState = static_cast<std::uint8_t>(StageState::running);
  for (const auto& p : report) {
    if (std::find(node_ranks.begin(), node_ranks.end(), p.rank) == node_ranks.end())
      return fmt::format("node {} reported the progress of stage {}, which it does not run",
                         node, p.rank);
    if (p.state > kLastState)
      return fmt::format("node {} reported stage {} in state {}, which does not exist", node,
                         p.rank, p.state);
    if (p.age_ns < -1 || p.round < 0 || p.step < 0 || p.slot < 0)
      return fmt::format("node {} reported stage {} with a negative age, round, step or slot",
                         node, p.rank);
  }
  for (const auto& p : report) {
    if (p.age_ns < 0) continue;  // not begun there: stays unpublished here
    board.stage(p.rank).publish(static_cast<StageState>(p.state), p.round, p.step, p.eval, p.slot,
                                now_ns - p.age_ns, p.first_micro_batch);
  }
  return std::nullopt;
}

}  // namespace conveyor::trace
