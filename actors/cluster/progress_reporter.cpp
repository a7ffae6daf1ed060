#include "actors/cluster/progress_reporter.hpp"

#include <algorithm>

#include "actors/messages/messages.hpp"
#include "actors/trace/remote_progress.hpp"
#include "actors/trace/stage_probe.hpp"

namespace conveyor {
namespace {

using report_tick_atom = caf::atom_constant<caf::atom("reporttick")>;

}  // namespace

std::chrono::milliseconds progress_report_interval(double timeout_s) {
  const auto tenth = static_cast<std::int64_t>(timeout_s * 100.0);  // ms
  return std::chrono::milliseconds(std::clamp<std::int64_t>(tenth, 20, 250));
}

caf::behavior progress_reporter(caf::event_based_actor* self,
                                std::shared_ptr<const trace::ProgressBoard> board,
                                std::vector<int> ranks, int node, caf::actor node0_directory,
                                std::chrono::milliseconds interval) {
  self->send(self, report_tick_atom::value);
  return {
      [=](report_tick_atom) {
        self->send(node0_directory,
                   ProgressReport{node, trace::progress_report(*board, ranks, trace::now_ns())});
        self->delayed_send(self, interval, report_tick_atom::value);
      },
  };
}

}  // namespace conveyor
