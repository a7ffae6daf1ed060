#include "actors/plan/schedule/simulation.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "actors/plan/schedule/action_index.hpp"
#include "actors/plan/schedule/activations.hpp"
#include "actors/plan/schedule/comm_pass.hpp"
#include "actors/plan/schedule/dependencies.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::sched {
namespace {

void check_ranges(const Schedule& s, const std::string& who) {
  if (s.spec.stages < 1 || s.spec.micro_batches < 1 ||
      s.ranks.size() != static_cast<std::size_t>(s.spec.stages)) {
    throw InputError(who + ": schedule " + s.spec.name + " has " + std::to_string(s.ranks.size()) +
                     " rank lists for stages = " + std::to_string(s.spec.stages));
  }
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    for (const Action& a : s.ranks[r]) {
      if (a.stage != static_cast<int>(r) || a.micro_batch < 0 ||
          a.micro_batch >= s.spec.micro_batches || a.chunk < 0 || a.chunk >= s.chunks_per_rank()) {
        throw InputError(who + ": action " + a.str() + " on rank " + std::to_string(r) +
                         " is outside the schedule (stages = " + std::to_string(s.spec.stages) +
                         ", micro_batches = " + std::to_string(s.spec.micro_batches) +
                         ", chunks per rank = " + std::to_string(s.chunks_per_rank()) +
                         "); run validate() for details");
      }
    }
  }
}

ActionKind recv_kind(ActionKind compute) {
  return compute == ActionKind::F ? ActionKind::RECV_F : ActionKind::RECV_B;
}

// One input of an action: the action whose end it waits for.
struct Input {
  Action needs;
  bool message = false;    // crosses ranks without a RECV: arrives message_us after the end
  bool no_sender = false;  // a RECV nobody sends to: needs is the RECV itself, never done
};

struct Inputs {
  std::array<Input, 2> at;
  int count = 0;
  void add(const Action& needs, bool message, bool no_sender = false) { at[count++] = {needs, message, no_sender}; }
};

// What `a` waits for: the model at the top of simulation.hpp.
Inputs inputs_of(const Schedule& s, const Action& a, bool split, bool with_comm) {
  Inputs in;
  const int r = a.stage;
  switch (a.kind) {
    case ActionKind::F:
    case ActionKind::B:
    case ActionKind::I: {
      if (a.kind != ActionKind::F) in.add({r, ActionKind::F, a.micro_batch, a.chunk}, false);
      const auto from = detail::producer_of(s, a, split);
      if (!from) break;
      if (from->stage == r) {
        in.add(*from, false);
      } else if (with_comm) {
        in.add({r, recv_kind(a.kind), a.micro_batch, a.chunk}, false);
      } else {
        in.add(*from, true);
      }
      break;
    }
    case ActionKind::W:
      in.add({r, ActionKind::I, a.micro_batch, a.chunk}, false);
      break;
    case ActionKind::SEND_F:
    case ActionKind::SEND_B:
      in.add(*detail::compute_of(a, split), false);
      break;
    case ActionKind::RECV_F:
    case ActionKind::RECV_B: {
      const auto peer = detail::peer_of(s, a, split);
      if (peer) {
        in.add(*peer, peer->stage != r);
      } else {
        in.add(a, false, true);
      }
      break;
    }
  }
  return in;
}

}  // namespace

Simulation::Simulation(Schedule schedule, const std::string& who) : schedule_(std::move(schedule)) {
  const Schedule& s = schedule_;
  check_ranges(s, who);
  split_ = splits_backward(s);
  with_comm_ = has_communication(s);
  const ActionIndex index(s);
  std::size_t actions = 0;
  for (const auto& list : s.ranks) actions += list.size();
  rank_begin_.reserve(s.ranks.size());
  first_.reserve(actions + 1);
  deps_.reserve(2 * actions);  // at most two inputs each
  for (const auto& list : s.ranks) {
    rank_begin_.push_back(first_.size());
    for (const Action& a : list) {
      first_.push_back(deps_.size());
      const Inputs in = inputs_of(s, a, split_, with_comm_);
      for (int k = 0; k < in.count; ++k) {
        const Input& i = in.at[k];
        deps_.push_back({i.needs.stage, i.no_sender ? -1 : index.slot(i.needs), i.message});
      }
    }
  }
  first_.push_back(deps_.size());
  peaks_ = peak_activations(s);
}

SimResult Simulation::run_with(Lookup duration_us, double message_us) const {
  const Schedule& s = schedule_;
  const int p = s.spec.stages;
  SimResult out;
  out.timings.resize(p);
  for (int r = 0; r < p; ++r) out.timings[r].reserve(s.ranks[r].size());
  out.busy.assign(p, 0.0);
  std::vector<std::size_t> next(p, 0);  // ranks[r][0, next[r]) have run
  std::vector<double> free_at(p, 0.0);
  const auto done = [&](const Dep& d) {
    return d.slot >= 0 && static_cast<std::size_t>(d.slot) < next[d.rank];
  };
  // Start times depend only on the ends of earlier actions, so sweeping the ranks in any
  // order until nothing moves gives the event-driven result.
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < p; ++r) {
      const auto& list = s.ranks[r];
      while (next[r] < list.size()) {
        const std::size_t n = rank_begin_[r] + next[r];
        const Dep* begin = deps_.data() + first_[n];
        const Dep* end = deps_.data() + first_[n + 1];
        if (!std::all_of(begin, end, done)) break;
        double start = free_at[r];
        for (const Dep* d = begin; d != end; ++d) {
          start = std::max(start, out.timings[d->rank][d->slot].end_us + (d->message ? message_us : 0.0));
        }
        const Action& a = list[next[r]];
        const double took = duration_us(a);
        out.timings[r].push_back({a, start, start + took});
        out.busy[r] += took;
        free_at[r] = start + took;
        ++next[r];
        progress = true;
      }
    }
  }

  for (int r = 0; r < p; ++r) {
    if (next[r] == s.ranks[r].size()) continue;
    const std::size_t n = rank_begin_[r] + next[r];
    const Action& a = s.ranks[r][next[r]];
    const Inputs in = inputs_of(s, a, split_, with_comm_);  // deps_[first_[n] + k] is in.at[k]
    for (int k = 0; k < in.count; ++k) {
      const Dep& d = deps_[first_[n] + static_cast<std::size_t>(k)];
      if (done(d)) continue;
      out.waits.push_back({r, next[r], a, in.at[k].needs, d.slot >= 0});
      break;
    }
  }
  if (!out.waits.empty()) {
    std::string msg = "deadlock: ";
    for (std::size_t k = 0; k < out.waits.size(); ++k) msg += (k ? "; " : "") + describe(out.waits[k]);
    out.deadlock = msg;
  }

  for (const auto& list : out.timings) {
    for (const TimedAction& t : list) out.makespan = std::max(out.makespan, t.end_us);
  }
  double idle_total = 0.0;
  for (int r = 0; r < p; ++r) {
    out.idle.push_back(out.makespan - out.busy[r]);
    out.stage_bubble.push_back(out.makespan > 0 ? out.idle[r] / out.makespan : 0.0);
    idle_total += out.idle[r];
  }
  out.bubble = out.makespan > 0 ? idle_total / (p * out.makespan) : 0.0;
  out.peak_activations = peaks_;
  return out;
}

std::string Simulation::describe(const Wait& w) const {
  const Schedule& s = schedule_;
  const std::string rank = "rank " + std::to_string(w.rank);
  if (w.needs == w.action) return rank + "'s " + w.action.str() + " has no sender";
  Action data = w.needs;  // a SEND stands for the compute action whose output it carries
  if (is_send(data.kind)) data = *detail::compute_of(data, split_);
  std::string what = std::string(kind_name(data.kind)) + " mb " + std::to_string(data.micro_batch);
  const std::string chunk =
      s.chunks_per_rank() > 1 ? " (chunk " + std::to_string(data.chunk) + ")" : "";
  if (w.needs.stage == w.rank) {
    return rank + " waits for its own " + what + chunk + ", which " +
           (w.needs_exists ? "comes later in its list" : "is not in its list");
  }
  const std::string from = "rank " + std::to_string(w.needs.stage);
  return rank + " waits for " + what + " from " + from + chunk +
         (w.needs_exists ? "" : ", which " + from + " never runs");
}

}  // namespace conveyor::sched
