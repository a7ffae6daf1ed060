#pragma once
// Requests of the coordinator that must be acted on only in the generation they were
// made in (coordinator_actor.hpp: every recovery bumps CoordinatorState::generation, and
// what was asked before it is void: its replies and errors are dropped). Internal to
// actors/coordinator/.
#include <caf/all.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace conveyor::coordinator_flow {

/// Whether `generation`, taken when a request was made or a message was scheduled, is
/// still the coordinator's: the one place the stale-generation check is written.
template <class State>
bool is_current(const State& st, std::uint64_t generation) {
  return st.generation == generation;
}

/// One request (`request`, just made by `self`) whose reply and error are acted on only
/// while the generation it was made in is current.
template <class Reply, class Self, class Handle, class OnReply, class OnError>
void if_current(Self* self, Handle&& request, OnReply on_reply, OnError on_error) {
  const auto generation = self->state.generation;
  std::forward<Handle>(request).then(
      [=](Reply& reply) {
        if (is_current(self->state, generation)) on_reply(reply);
      },
      [=](caf::error& e) {
        if (is_current(self->state, generation)) on_error(e);
      });
}

/// What a gather does with the replies of the generation it began in (gather below).
template <class Reply>
struct GatherHandlers {
  /// Once every rank replied: the replies by rank.
  std::function<void(std::map<int, Reply>& replies)> all;
  /// On every failure. A failed rank never replies, so `all` does not run after one; the
  /// handler may ignore the error when another event ends the generation (a stage that
  /// died is recovered through its down message), so later failures still reach it.
  std::function<void(int rank, caf::error& e)> failed;
  /// Optional: on every reply as it arrives, before `all` (what each reply tells at once).
  std::function<void(int rank, Reply& reply)> each{};
};

/// Asks every rank of `ranks` (`ask(rank)` makes the request: to the stage, or to another
/// actor on its behalf) and gathers the typed replies by rank; replies and errors that
/// arrive after the generation changed are dropped. No ranks: `all` runs at once.
template <class Reply, class Self, class Ask>
void gather(Self* self, const std::vector<int>& ranks, Ask ask, GatherHandlers<Reply> on) {
  auto replies = std::make_shared<std::map<int, Reply>>();
  auto handlers = std::make_shared<GatherHandlers<Reply>>(std::move(on));
  if (ranks.empty()) {
    handlers->all(*replies);
    return;
  }
  const auto expected = ranks.size();
  for (int rank : ranks)
    if_current<Reply>(
        self, ask(rank),
        [=](Reply& reply) {
          if (handlers->each) handlers->each(rank, reply);
          replies->insert_or_assign(rank, std::move(reply));
          if (replies->size() == expected) handlers->all(*replies);
        },
        [=](caf::error& e) { handlers->failed(rank, e); });
}

/// An `ask` for gather: each rank's stage actor is sent `message`.
template <class Self, class Message>
auto asking_stages(Self* self, Message message) {
  return [self, message](int rank) {
    const auto& stage = self->state.stages[static_cast<std::size_t>(rank)];
    return self->request(stage, caf::infinite, message);
  };
}

/// Ranks 0 … n−1.
inline std::vector<int> first_ranks(std::size_t n) {
  std::vector<int> ranks;
  for (std::size_t r = 0; r < n; ++r) ranks.push_back(static_cast<int>(r));
  return ranks;
}

}  // namespace conveyor::coordinator_flow
