#include "actors/plan/schedule/dependencies.hpp"

namespace conveyor::sched {
namespace detail {
namespace {

ActionKind backward_kind(bool split) { return split ? ActionKind::I : ActionKind::B; }

// The compute action of model stage `stage` for micro-batch i, or nullopt off the ends.
std::optional<Action> at_stage(const Schedule& s, int stage, ActionKind kind, int i) {
  if (stage < 0 || stage >= s.model_stages()) return std::nullopt;
  const RankChunk h = s.holder(stage);
  return Action{h.rank, kind, i, h.chunk};
}

}  // namespace

std::optional<Action> producer_of(const Schedule& s, const Action& a, bool split) {
  const int stage = s.model_stage(a.stage, a.chunk);
  if (a.kind == ActionKind::F) return at_stage(s, stage - 1, ActionKind::F, a.micro_batch);
  if (is_input_backward(a.kind)) return at_stage(s, stage + 1, backward_kind(split), a.micro_batch);
  return std::nullopt;
}

std::optional<Action> consumer_of(const Schedule& s, const Action& a, bool split) {
  const int stage = s.model_stage(a.stage, a.chunk);
  if (a.kind == ActionKind::F) return at_stage(s, stage + 1, ActionKind::F, a.micro_batch);
  if (is_input_backward(a.kind)) return at_stage(s, stage - 1, backward_kind(split), a.micro_batch);
  return std::nullopt;
}

std::optional<Action> compute_of(const Action& a, bool split) {
  switch (a.kind) {
    case ActionKind::SEND_F:
    case ActionKind::RECV_F:
      return Action{a.stage, ActionKind::F, a.micro_batch, a.chunk};
    case ActionKind::SEND_B:
    case ActionKind::RECV_B:
      return Action{a.stage, backward_kind(split), a.micro_batch, a.chunk};
    default:
      return std::nullopt;
  }
}

std::optional<Action> peer_of(const Schedule& s, const Action& a, bool split) {
  const auto compute = compute_of(a, split);
  if (!compute) return std::nullopt;
  const auto other = is_send(a.kind) ? consumer_of(s, *compute, split) : producer_of(s, *compute, split);
  if (!other) return std::nullopt;
  ActionKind kind = ActionKind::F;
  switch (a.kind) {
    case ActionKind::SEND_F: kind = ActionKind::RECV_F; break;
    case ActionKind::RECV_F: kind = ActionKind::SEND_F; break;
    case ActionKind::SEND_B: kind = ActionKind::RECV_B; break;
    default: kind = ActionKind::SEND_B; break;
  }
  return Action{other->stage, kind, a.micro_batch, other->chunk};
}

}  // namespace detail

bool splits_backward(const Schedule& s) {
  for (const auto& list : s.ranks) {
    for (const Action& a : list) {
      if (a.kind == ActionKind::I) return true;
    }
  }
  return false;
}

std::optional<Action> producer_of(const Schedule& s, const Action& consumer) {
  return detail::producer_of(s, consumer, splits_backward(s));
}

std::optional<Action> consumer_of(const Schedule& s, const Action& producer) {
  return detail::consumer_of(s, producer, splits_backward(s));
}

std::optional<Action> compute_of(const Schedule& s, const Action& comm) {
  return detail::compute_of(comm, splits_backward(s));
}

std::optional<Action> peer_of(const Schedule& s, const Action& comm) {
  return detail::peer_of(s, comm, splits_backward(s));
}

}  // namespace conveyor::sched
