#include "actors/plan/schedule/comm_pass.hpp"

#include "actors/plan/schedule/dependencies.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::sched {
namespace {

ActionKind recv_kind(ActionKind compute) {
  return compute == ActionKind::F ? ActionKind::RECV_F : ActionKind::RECV_B;
}

ActionKind send_kind(ActionKind compute) {
  return compute == ActionKind::F ? ActionKind::SEND_F : ActionKind::SEND_B;
}

}  // namespace

bool has_communication(const Schedule& s) {
  for (const auto& list : s.ranks) {
    for (const Action& a : list) {
      if (!is_compute(a.kind)) return true;
    }
  }
  return false;
}

Schedule add_communication(const Schedule& s) {
  if (has_communication(s)) {
    throw InputError("add_communication: schedule " + s.spec.name +
                     " already has SEND/RECV actions");
  }
  const bool split = splits_backward(s);
  Schedule out{s.spec, std::vector<std::vector<Action>>(s.ranks.size())};
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    auto& list = out.ranks[r];
    for (const Action& a : s.ranks[r]) {
      const auto from = detail::producer_of(s, a, split);
      if (from && from->stage != a.stage) {
        list.push_back({a.stage, recv_kind(a.kind), a.micro_batch, a.chunk});
      }
      list.push_back(a);
      const auto to = detail::consumer_of(s, a, split);
      if (to && to->stage != a.stage) {
        list.push_back({a.stage, send_kind(a.kind), a.micro_batch, a.chunk});
      }
    }
  }
  return out;
}

Schedule strip_communication(const Schedule& s) {
  Schedule out{s.spec, std::vector<std::vector<Action>>(s.ranks.size())};
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    for (const Action& a : s.ranks[r]) {
      if (is_compute(a.kind)) out.ranks[r].push_back(a);
    }
  }
  return out;
}

}  // namespace conveyor::sched
