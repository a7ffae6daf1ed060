#pragma once
// Data dependencies between actions: which action's output another one reads as its
// message input, and which SEND a RECV pairs with. The simulator, the validator, the
// communication pass and the runtime share these rules:
//   F(s, i)      needs F(s−1, i)'s activation                 (s = model stage)
//   B/I(s, i)    needs F(s, i) on its own rank (its stash) and B/I(s+1, i)'s gradient
//   W(s, i)      needs I(s, i) on its own rank
// Model stage s lives on (rank, chunk) = schedule.holder(s). A gradient comes from I when
// the schedule splits the backward (it has any I action), else from B.
// Pure logic: no CAF.
#include <optional>

#include "actors/plan/schedule/schedule.hpp"

namespace conveyor::sched {

/// True when the schedule has any I action (zb-h1, zbv): gradients then come from I.
/// O(actions).
bool splits_backward(const Schedule& schedule);

/// The compute action whose output `consumer` reads as its message input:
///   F(s, i) ← F(s−1, i);   B or I (s, i) ← B or I (s+1, i).
/// nullopt when the input is no message: F of model stage 0 (reads the batch), B/I of the
/// last model stage (starts from the loss), W, and communication actions.
/// The result's `stage` is the rank that runs it, so `result->stage != consumer.stage`
/// says the message crosses ranks (the rank needs a RECV before `consumer`); equal ranks
/// mean a hand-off between two chunks of one rank.
/// O(actions) (it calls splits_backward).
std::optional<Action> producer_of(const Schedule& schedule, const Action& consumer);

/// The inverse of producer_of: the compute action that reads `producer`'s output
/// (F(s, i) → F(s+1, i); B/I(s, i) → B/I(s−1, i)); nullopt at the pipeline's ends, for W
/// and for communication actions. O(actions).
std::optional<Action> consumer_of(const Schedule& schedule, const Action& producer);

/// For SEND_F/SEND_B, the compute action whose output it ships (F, or B/I, same rank,
/// micro-batch and chunk); for RECV_F/RECV_B, the compute action it feeds. nullopt for
/// compute actions. O(actions).
std::optional<Action> compute_of(const Schedule& schedule, const Action& comm);

/// The matching communication action on the peer rank: SEND_F ↔ RECV_F, SEND_B ↔ RECV_B
/// (its `stage` is the peer rank). nullopt for compute actions and at the pipeline's ends.
/// O(actions).
std::optional<Action> peer_of(const Schedule& schedule, const Action& comm);

namespace detail {
// The same with the backward kind given, O(1): for loops over every action.
std::optional<Action> producer_of(const Schedule& s, const Action& consumer, bool split);
std::optional<Action> consumer_of(const Schedule& s, const Action& producer, bool split);
std::optional<Action> compute_of(const Action& comm, bool split);
std::optional<Action> peer_of(const Schedule& s, const Action& comm, bool split);
}  // namespace detail

}  // namespace conveyor::sched
