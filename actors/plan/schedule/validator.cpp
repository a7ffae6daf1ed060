#include "actors/plan/schedule/validator.hpp"

#include <map>

#include "actors/plan/schedule/activations.hpp"
#include "actors/plan/schedule/comm_pass.hpp"
#include "actors/plan/schedule/dependencies.hpp"
#include "actors/plan/schedule/grid.hpp"
#include "actors/plan/schedule/simulator.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::sched {
namespace {

[[noreturn]] void fail(const Schedule& s, const std::string& summary,
                       const std::vector<GridMark>& marks) {
  throw InputError("schedule " + s.spec.name + ": " + summary + "\n" + render_grid(s, marks));
}

std::string cell(const Schedule& s, const Action& a) { return a.str(s.chunks_per_rank() > 1); }

std::string where(const Schedule& s, int rank, int chunk, int micro_batch) {
  std::string w = "rank " + std::to_string(rank);
  if (s.chunks_per_rank() > 1) w += " chunk " + std::to_string(chunk);
  return w + " micro-batch " + std::to_string(micro_batch);
}

// 1.
void check_shape(const Schedule& s) {
  if (s.spec.stages < 1 || s.spec.micro_batches < 1) {
    fail(s, "stages = " + std::to_string(s.spec.stages) + " and micro_batches = " +
                std::to_string(s.spec.micro_batches) + " must be >= 1", {});
  }
  if (s.ranks.size() != static_cast<std::size_t>(s.spec.stages)) {
    fail(s, "has " + std::to_string(s.ranks.size()) + " rank lists for stages = " +
                std::to_string(s.spec.stages), {});
  }
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    for (std::size_t k = 0; k < s.ranks[r].size(); ++k) {
      const Action& a = s.ranks[r][k];
      const GridMark mark{static_cast<int>(r), k};
      if (a.stage != static_cast<int>(r)) {
        fail(s, "rank " + std::to_string(r) + " slot " + std::to_string(k) + " holds " + a.str() +
                    ", an action of rank " + std::to_string(a.stage), {mark});
      }
      if (a.micro_batch < 0 || a.micro_batch >= s.spec.micro_batches) {
        fail(s, a.str() + ": micro-batch " + std::to_string(a.micro_batch) +
                    " is out of range (micro_batches = " + std::to_string(s.spec.micro_batches) + ")",
             {mark});
      }
      if (a.chunk < 0 || a.chunk >= s.chunks_per_rank()) {
        fail(s, a.str(true) + ": chunk " + std::to_string(a.chunk) +
                    " is out of range (chunks per rank = " + std::to_string(s.chunks_per_rank()) + ")",
             {mark});
      }
    }
  }
}

// Slot of each kind per (chunk, micro-batch) on one rank; -1 when absent.
struct Slots {
  int of[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  int& operator[](ActionKind k) { return of[static_cast<int>(k)]; }
};

// Per rank, slots[chunk][micro_batch]; fails on an action that appears twice.
std::vector<std::vector<std::vector<Slots>>> index_slots(const Schedule& s) {
  const int chunks = s.chunks_per_rank();
  std::vector<std::vector<std::vector<Slots>>> slots(
      s.ranks.size(), std::vector<std::vector<Slots>>(chunks, std::vector<Slots>(s.spec.micro_batches)));
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    for (std::size_t k = 0; k < s.ranks[r].size(); ++k) {
      const Action& a = s.ranks[r][k];
      int& slot = slots[r][a.chunk][a.micro_batch][a.kind];
      if (slot >= 0) {
        fail(s, "rank " + std::to_string(r) + " runs " + cell(s, a) + " twice (slots " +
                    std::to_string(slot) + " and " + std::to_string(k) + ")",
             {{static_cast<int>(r), k}});
      }
      slot = static_cast<int>(k);
    }
  }
  return slots;
}

// 2. and 3.
void check_compute(const Schedule& s, std::vector<std::vector<std::vector<Slots>>>& slots) {
  using K = ActionKind;
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    const int rank = static_cast<int>(r);
    for (int c = 0; c < s.chunks_per_rank(); ++c) {
      for (int i = 0; i < s.spec.micro_batches; ++i) {
        Slots& x = slots[r][c][i];
        const auto mark = [&](int slot) { return std::vector<GridMark>{{rank, static_cast<std::size_t>(slot)}}; };
        const std::string at = where(s, rank, c, i);
        if (x[K::B] >= 0 && (x[K::I] >= 0 || x[K::W] >= 0)) {
          fail(s, at + " has both B and I/W", mark(std::max(x[K::I], x[K::W])));
        }
        if (x[K::F] < 0) {
          for (K k : {K::B, K::I, K::W}) {
            if (x[k] >= 0) fail(s, at + " has " + std::string(kind_name(k)) + " but no F", mark(x[k]));
          }
          fail(s, at + " has no F and no backward", {});
        }
        if (x[K::B] < 0 && x[K::I] < 0 && x[K::W] < 0) {
          fail(s, at + " has F but no B (nor I and W)", mark(x[K::F]));
        }
        if (x[K::I] >= 0 && x[K::W] < 0) fail(s, at + " has I but no W", mark(x[K::I]));
        if (x[K::W] >= 0 && x[K::I] < 0) fail(s, at + " has W but no I", mark(x[K::W]));
        const int backward = x[K::B] >= 0 ? x[K::B] : x[K::I];
        if (backward < x[K::F]) {
          fail(s, at + ": " + cell(s, s.ranks[r][backward]) + " runs before its F",
               {{rank, static_cast<std::size_t>(backward)}, {rank, static_cast<std::size_t>(x[K::F])}});
        }
        if (x[K::W] >= 0 && x[K::W] < x[K::I]) {
          fail(s, at + ": " + cell(s, s.ranks[r][x[K::W]]) + " runs before its I",
               {{rank, static_cast<std::size_t>(x[K::W])}, {rank, static_cast<std::size_t>(x[K::I])}});
        }
      }
    }
  }
}

// 4. First every cross-rank input and output of a compute action, so the message names
// the compute action; then every communication action against its compute action and peer.
void check_comm_actions(const Schedule& s, std::vector<std::vector<std::vector<Slots>>>& slots,
                        bool split) {
  const auto at = [](int slot) { return static_cast<std::size_t>(slot); };
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    const int rank = static_cast<int>(r);
    for (std::size_t k = 0; k < s.ranks[r].size(); ++k) {
      const Action& a = s.ranks[r][k];
      if (!is_compute(a.kind)) continue;
      const GridMark here{rank, k};
      const bool forward = a.kind == ActionKind::F;
      const auto from = detail::producer_of(s, a, split);
      if (from && from->stage != rank) {
        const Action recv{rank, forward ? ActionKind::RECV_F : ActionKind::RECV_B, a.micro_batch, a.chunk};
        const int slot = slots[r][a.chunk][a.micro_batch][recv.kind];
        if (slot < 0) fail(s, cell(s, a) + " needs " + cell(s, recv) + " before it", {here});
        if (at(slot) > k) {
          fail(s, cell(s, recv) + " comes after its consumer " + cell(s, a), {here, {rank, at(slot)}});
        }
      }
      const auto to = detail::consumer_of(s, a, split);
      if (to && to->stage != rank) {
        const Action send{rank, forward ? ActionKind::SEND_F : ActionKind::SEND_B, a.micro_batch, a.chunk};
        const int slot = slots[r][a.chunk][a.micro_batch][send.kind];
        if (slot < 0) fail(s, cell(s, a) + " needs " + cell(s, send) + " after it", {here});
        if (at(slot) < k) {
          fail(s, cell(s, send) + " comes before its producer " + cell(s, a), {here, {rank, at(slot)}});
        }
      }
    }
  }
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    const int rank = static_cast<int>(r);
    for (std::size_t k = 0; k < s.ranks[r].size(); ++k) {
      const Action& a = s.ranks[r][k];
      if (is_compute(a.kind)) continue;
      const GridMark here{rank, k};
      const auto peer = detail::peer_of(s, a, split);
      if (!peer) fail(s, cell(s, a) + " has no peer: nothing is sent that way at the pipeline's end", {here});
      if (peer->stage == rank) {
        fail(s, cell(s, a) + " pairs with its own rank (a hand-off needs no message)", {here});
      }
      const Action compute = *detail::compute_of(a, split);
      if (slots[r][a.chunk][a.micro_batch][compute.kind] < 0) {
        fail(s, cell(s, a) + " belongs to " + cell(s, compute) + ", which rank " + std::to_string(r) +
                    " does not run", {here});
      }
      if (slots[peer->stage][peer->chunk][peer->micro_batch][peer->kind] < 0) {
        fail(s, cell(s, a) + " has no matching " + cell(s, *peer) + " on rank " +
                    std::to_string(peer->stage), {here});
      }
    }
  }
}

// 5.
void check_deadlock(const Schedule& s) {
  const SimResult run = simulate(s, SimCosts::uniform(1.0, 1.0, 1.0, 1.0));
  if (run.ok()) return;
  std::vector<GridMark> marks;
  for (const Wait& w : run.waits) marks.push_back({w.rank, w.slot});
  fail(s, *run.deadlock, marks);
}

// 6. A pipeline edge is a directed pair of model stages (s → s+1 for activations, s+1 → s
// for gradients): the runtime gives each its own in-order channel. Two ranks may share
// several edges (zbv's rank 0 sends stage 0's activations and stage 3's gradients to
// rank 1), and those need not keep an order between each other.
void check_edge_order(const Schedule& s, bool split) {
  struct Message {
    std::size_t slot;  // of the SEND (or RECV) in its rank's list
    Action recv;       // the RECV it is (or should be matched by)
  };
  const auto stage_of = [&](const Action& a) { return s.model_stage(a.stage, a.chunk); };
  std::map<std::pair<int, int>, std::vector<Message>> sent;      // edge → in send order
  std::map<std::pair<int, int>, std::vector<Message>> received;  // edge → in receive order
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    for (std::size_t k = 0; k < s.ranks[r].size(); ++k) {
      const Action& a = s.ranks[r][k];
      if (is_send(a.kind)) {
        const Action recv = *detail::peer_of(s, a, split);
        sent[{stage_of(a), stage_of(recv)}].push_back({k, recv});
      } else if (is_recv(a.kind)) {
        received[{stage_of(*detail::peer_of(s, a, split)), stage_of(a)}].push_back({k, a});
      }
    }
  }
  for (const auto& [edge, sends] : sent) {
    const auto& recvs = received[edge];
    for (std::size_t n = 0; n < std::min(sends.size(), recvs.size()); ++n) {
      if (sends[n].recv == recvs[n].recv) continue;
      const int from_rank = s.holder(edge.first).rank;
      const Action& send = s.ranks[from_rank][sends[n].slot];
      const int to_rank = s.holder(edge.second).rank;
      fail(s, "on the edge from model stage " + std::to_string(edge.first) + " to " +
                  std::to_string(edge.second) + ", rank " + std::to_string(to_rank) + " takes " +
                  cell(s, recvs[n].recv) + " as message " + std::to_string(n) + " where rank " +
                  std::to_string(from_rank) + " sends " + cell(s, send) +
                  ": each edge must be received in the order it is sent",
           {{to_rank, recvs[n].slot}, {from_rank, sends[n].slot}});
    }
  }
}

// 7.
void check_activations(const Schedule& s, int bound) {
  const auto counts = in_flight_counts(s);
  for (std::size_t r = 0; r < counts.size(); ++r) {
    for (std::size_t k = 0; k < counts[r].size(); ++k) {
      if (counts[r][k] > bound) {
        fail(s, "rank " + std::to_string(r) + " holds " + std::to_string(counts[r][k]) +
                    " micro-batches in flight after " + cell(s, s.ranks[r][k]) +
                    ", more than max_activations = " + std::to_string(bound),
             {{static_cast<int>(r), k}});
      }
    }
  }
}

// 8.
void check_weight_order(const Schedule& s, bool split) {
  const ActionKind weight = split ? ActionKind::W : ActionKind::B;
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    std::map<int, std::size_t> last;  // chunk → slot of its latest weight-gradient action
    for (std::size_t k = 0; k < s.ranks[r].size(); ++k) {
      const Action& a = s.ranks[r][k];
      if (a.kind != weight) continue;
      const auto it = last.find(a.chunk);
      if (it != last.end() && s.ranks[r][it->second].micro_batch > a.micro_batch) {
        fail(s, "rank " + std::to_string(r) + " runs " + cell(s, a) + " after " +
                    cell(s, s.ranks[r][it->second]) +
                    ": weight gradients must accumulate in micro-batch order",
             {{static_cast<int>(r), k}});
      }
      last[a.chunk] = k;
    }
  }
}

}  // namespace

void validate(const Schedule& s, const ValidationOptions& options) {
  // Before anything is indexed by (rank, chunk, micro-batch): a schedule read from a file
  // (a trace's schedule.json) must not size those tables past what any run can have.
  const std::int64_t chunks = spec_chunks(s.spec);
  if (s.spec.stages < 1 || s.spec.micro_batches < 1 || chunks < 1 || schedule_cells(s.spec) > kMaxScheduleCells)
    throw InputError("schedule: " + std::to_string(s.spec.stages) + " stages x " +
                     std::to_string(s.spec.micro_batches) + " micro-batches x " + std::to_string(chunks) +
                     " chunks is not a schedule (each at least 1, at most " + std::to_string(kMaxScheduleCells) +
                     " cells in all)");
  check_shape(s);
  auto slots = index_slots(s);
  check_compute(s, slots);
  const bool split = splits_backward(s);
  const bool with_comm = has_communication(s);
  if (with_comm) check_comm_actions(s, slots, split);
  check_deadlock(s);
  if (with_comm) check_edge_order(s, split);
  if (options.max_activations) check_activations(s, *options.max_activations);
  if (options.require_ordered_weight_grads) check_weight_order(s, split);
}

}  // namespace conveyor::sched
