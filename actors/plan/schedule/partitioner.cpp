#include "actors/plan/schedule/partitioner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "actors/plan/schedule/comm_pass.hpp"
#include "actors/plan/schedule/dependencies.hpp"
#include "actors/plan/schedule/stage_costs.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::sched {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// A change shorter than this share of the step is noise, not an improvement.
constexpr double kRelativeGain = 1e-9;
// Local-search rounds; each tries every single-half move (2 per boundary).
constexpr int kMaxRounds = 64;

std::string format_double(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string format_us(double us) {
  if (us >= 1e6) return format_double("%.4g s", us / 1e6);
  if (us >= 1e3) return format_double("%.4g ms", us / 1e3);
  return format_double("%.4g us", us);
}

std::string format_bytes(double b) {
  if (b >= 1024.0 * 1024 * 1024) return format_double("%.4g GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return format_double("%.4g MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return format_double("%.4g KiB", b / 1024.0);
  return format_double("%.0f B", b);
}

std::string percent(double fraction) { return format_double("%.1f%%", 100.0 * fraction); }


// Per model stage: how many micro-batches its (rank, chunk) holds at most at once.
std::vector<int> chunk_peaks(const Schedule& s) {
  const ActionKind release = splits_backward(s) ? ActionKind::W : ActionKind::B;
  std::vector<int> peaks(static_cast<std::size_t>(s.model_stages()), 0);
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    std::vector<int> n(static_cast<std::size_t>(s.chunks_per_rank()), 0);
    for (const Action& a : s.ranks[r]) {
      auto& count = n[static_cast<std::size_t>(a.chunk)];
      if (a.kind == ActionKind::F) ++count;
      if (a.kind == release) --count;
      auto& peak = peaks[static_cast<std::size_t>(s.model_stage(static_cast<int>(r), a.chunk))];
      peak = std::max(peak, count);
    }
  }
  return peaks;
}

// Sums over the units of each model stage, from prefix sums over the half blocks.
class StageSums {
 public:
  StageSums(const ModelCosts& costs, int model_stages) : costs_(costs), stages_(model_stages) {
    const int L = costs.halves();
    total_.assign(L + 1, 0.0);
    act_.assign(L + 1, 0.0);
    param_.assign(L + 1, 0.0);
    for (int b = 0; b < L; ++b) {
      const UnitCost& u = costs.units[static_cast<std::size_t>(b + 1)];
      total_[b + 1] = total_[b] + u.total_us();
      act_[b + 1] = act_[b] + u.activation_bytes;
      param_[b + 1] = param_[b] + u.param_bytes;
    }
  }

  // Model stage `s` with half blocks [a, b): its units' F + I + W.
  double total(int s, int a, int b) const {
    return total_[b] - total_[a] + ends(s, [](const UnitCost& u) { return u.total_us(); });
  }
  double activation(int s, int a, int b) const {
    return act_[b] - act_[a] + ends(s, [](const UnitCost& u) { return u.activation_bytes; });
  }
  double params(int s, int a, int b) const {
    return param_[b] - param_[a] + ends(s, [](const UnitCost& u) { return u.param_bytes; });
  }

 private:
  template <class Get>
  double ends(int s, Get get) const {
    double v = 0.0;
    if (s == 0) v += get(costs_.units.front());
    if (s == stages_ - 1) v += get(costs_.units.back());
    return v;
  }
  const ModelCosts& costs_;
  int stages_;
  std::vector<double> total_, act_, param_;
};

// The searches below cut L half blocks into S stages of at least one each; a cut is the
// vector of stage sizes. `fits(s, a, b)` says whether stage s may hold halves [a, b).
// Costs and bytes are sums of non-negative units, so a stage [i, j) only grows as i falls:
// each search walks i down from j - 1 and stops where no smaller i can do better (a stage
// over the cap, or one that no longer fits), which keeps the searches near S x L x L / S.
template <class Fits>
std::optional<double> min_bottleneck(int S, int L, const StageSums& sums, Fits fits) {
  // best[k][j]: the smallest bottleneck of stages 0..k-1 holding halves [0, j).
  std::vector<std::vector<double>> best(S + 1, std::vector<double>(L + 1, kInf));
  best[0][0] = 0.0;
  for (int k = 1; k <= S; ++k) {
    for (int j = k; j <= L - (S - k); ++j) {
      for (int i = j - 1; i >= k - 1; --i) {
        const double t = sums.total(k - 1, i, j);
        if (t >= best[k][j] || !fits(k - 1, i, j)) break;  // smaller i: larger t, still not fitting
        if (best[k - 1][i] == kInf) continue;
        best[k][j] = std::min(best[k][j], std::max(best[k - 1][i], t));
      }
    }
  }
  if (best[S][L] == kInf) return std::nullopt;
  return best[S][L];
}

// Among the cuts whose every stage costs at most `cap` (and fits), the one with the
// smallest sum of squared stage costs: the most even one.
template <class Fits>
std::optional<std::vector<int>> most_even(int S, int L, const StageSums& sums, double cap, Fits fits) {
  std::vector<std::vector<double>> best(S + 1, std::vector<double>(L + 1, kInf));
  std::vector<std::vector<int>> from(S + 1, std::vector<int>(L + 1, -1));
  best[0][0] = 0.0;
  for (int k = 1; k <= S; ++k) {
    for (int j = k; j <= L - (S - k); ++j) {
      for (int i = j - 1; i >= k - 1; --i) {
        const double t = sums.total(k - 1, i, j);
        if (t > cap || !fits(k - 1, i, j)) break;
        if (best[k - 1][i] == kInf) continue;
        const double v = best[k - 1][i] + t * t;
        // <= walking down: among equal sums the smallest i wins, as an upward walk's < chose.
        if (v <= best[k][j]) best[k][j] = v, from[k][j] = i;
      }
    }
  }
  if (best[S][L] == kInf) return std::nullopt;
  std::vector<int> blocks(S);
  for (int k = S, j = L; k > 0; --k) {
    const int i = from[k][j];
    blocks[k - 1] = j - i;
    j = i;
  }
  return blocks;
}

// The smallest per-stage memory any cut needs (a lower bound on any rank's peak).
double min_stage_memory(int S, int L, const StageSums& sums, const std::vector<int>& peaks) {
  std::vector<std::vector<double>> best(S + 1, std::vector<double>(L + 1, kInf));
  best[0][0] = 0.0;
  for (int k = 1; k <= S; ++k) {
    for (int j = k; j <= L - (S - k); ++j) {
      for (int i = k - 1; i < j; ++i) {
        if (best[k - 1][i] == kInf) continue;
        const double m = sums.params(k - 1, i, j) + peaks[k - 1] * sums.activation(k - 1, i, j);
        best[k][j] = std::min(best[k][j], std::max(best[k - 1][i], m));
      }
    }
  }
  return best[S][L];
}

// Per rank: parameters of its chunks plus the largest activation bytes in flight at once.
std::vector<double> rank_memory(const Schedule& s, const std::vector<double>& stage_act,
                                const std::vector<double>& stage_params) {
  const ActionKind release = splits_backward(s) ? ActionKind::W : ActionKind::B;
  std::vector<double> out;
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    const int rank = static_cast<int>(r);
    double params = 0.0;
    for (int c = 0; c < s.chunks_per_rank(); ++c) params += stage_params[s.model_stage(rank, c)];
    double held = 0.0, peak = 0.0;
    for (const Action& a : s.ranks[r]) {
      const double bytes = stage_act[s.model_stage(rank, a.chunk)];
      if (a.kind == ActionKind::F) held += bytes;
      if (a.kind == release) held -= bytes;
      peak = std::max(peak, held);
    }
    out.push_back(params + peak);
  }
  return out;
}

bool fits(const PartitionEval& e, const std::optional<double>& limit) {
  if (!limit) return true;
  return std::all_of(e.rank_memory_bytes.begin(), e.rank_memory_bytes.end(),
                     [&](double m) { return m <= *limit; });
}

bool shorter(const PartitionEval& a, const PartitionEval& b) {
  return a.step_us() < b.step_us() * (1.0 - kRelativeGain);
}

std::string stage_list(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += (s.empty() ? "" : ", ") + format_us(x);
  return s;
}

std::string explain(const PartitionRequest& req, const Schedule& schedule, const PartitionResult& r) {
  const auto& units = req.costs.units;
  const auto& c = r.chosen;
  const int S = schedule.model_stages();
  std::vector<double> totals;
  for (int s = 0; s < S; ++s) totals.push_back(c.stage_f_us[s] + c.stage_i_us[s] + c.stage_w_us[s]);
  const double block = units.size() > 3 ? units[1].total_us() + units[2].total_us() : 0.0;
  std::string text = "auto partition " + format_partition(r.halves_per_stage) + " blocks per model stage for " +
                     schedule.spec.name + " on " + std::to_string(schedule.spec.stages) + " ranks x " +
                     std::to_string(schedule.chunks_per_rank()) + " chunk" +
                     (schedule.chunks_per_rank() > 1 ? "s" : "") + " with " +
                     std::to_string(schedule.spec.micro_batches) + " micro-batches. Costs " + req.costs.source +
                     ".";
  if (block > 0) {
    text += " A block costs " + format_us(block) + " (F+I+W per micro-batch; its attention half " +
            percent(units[1].total_us() / block) + "); the head costs as much as " +
            format_double("%.2f", units.back().total_us() / block) + " blocks, the embedding " +
            format_double("%.2f", units.front().total_us() / block) + ".";
  }
  text += " Per-stage F+I+W: " + stage_list(totals) + ".";
  const auto& busy = c.sim.busy;
  const auto worst = static_cast<int>(std::max_element(busy.begin(), busy.end()) - busy.begin());
  text += " Bottleneck: rank " + std::to_string(worst) + " (busy " + format_us(busy[worst]) + " of the " +
          format_us(c.step_us()) + " step).";
  if (r.uniform_fits) {
    const double gain = r.uniform.step_us() > 0 ? 1.0 - c.step_us() / r.uniform.step_us() : 0.0;
    if (r.halves_per_stage == r.uniform.halves_per_stage) {
      text += " Uniform is already the best found: simulated step " + format_us(c.step_us()) + ", bubble " +
              percent(c.sim.bubble) + ".";
    } else {
      text += " Simulated step " + format_us(c.step_us()) + " vs " + format_us(r.uniform.step_us()) +
              " for uniform " + format_partition(r.uniform.halves_per_stage) + " (" +
              format_double("%.1f", 100.0 * gain) + "% shorter); bubble " + percent(c.sim.bubble) +
              " vs " + percent(r.uniform.sim.bubble) + ".";
    }
  } else if (r.uniform.halves_per_stage.empty()) {
    text += " Simulated step " + format_us(c.step_us()) + "; no whole-block split exists (fewer "
            "blocks than model stages).";
  } else {
    text += " Simulated step " + format_us(c.step_us()) + "; uniform " +
            format_partition(r.uniform.halves_per_stage) + " would need " +
            format_bytes(*std::max_element(r.uniform.rank_memory_bytes.begin(),
                                           r.uniform.rank_memory_bytes.end())) +
            " on a rank, over the memory limit.";
  }
  const double peak = *std::max_element(c.rank_memory_bytes.begin(), c.rank_memory_bytes.end());
  text += " Peak memory per rank " + format_bytes(peak);
  text += req.memory_limit_bytes ? " (limit " + format_bytes(*req.memory_limit_bytes) + ")." : ".";
  return text;
}

}  // namespace

std::vector<int> uniform_partition(int layers, int model_stages) {
  if (model_stages < 1 || model_stages > layers) {
    throw InputError("uniform partition: " + std::to_string(layers) + " blocks cannot fill " +
                     std::to_string(model_stages) + " model stages");
  }
  // Whole blocks as equal as possible; the first layers % model_stages stages take one more.
  std::vector<int> halves(static_cast<std::size_t>(model_stages), 2 * (layers / model_stages));
  for (int s = 0; s < layers % model_stages; ++s) halves[static_cast<std::size_t>(s)] += 2;
  return halves;
}

std::vector<int> halves_of_blocks(const std::vector<int>& blocks) {
  std::vector<int> halves;
  for (int b : blocks) halves.push_back(2 * b);
  return halves;
}

void check_partition(const std::vector<int>& halves, int layers, int model_stages, const std::string& key) {
  // Formatted on the error paths only: the partitioner checks every candidate it evaluates.
  const auto list = [&] { return format_partition(halves); };
  if (halves.size() != static_cast<std::size_t>(model_stages)) {
    throw InputError(key + ": " + list() + " has " + std::to_string(halves.size()) +
                     " entries, but the pipeline has " + std::to_string(model_stages) +
                     " model stages (stages x chunks per stage): give one block count per model stage");
  }
  long long sum = 0;
  for (std::size_t s = 0; s < halves.size(); ++s) {
    if (halves[s] < 1) {
      throw InputError(key + ": entry " + std::to_string(s) + " of " + list() + " is " +
                       format_half_blocks(halves[s]) + "; every model stage needs at least half a block (0.5)");
    }
    sum += halves[s];
  }
  if (sum != 2LL * layers) {
    throw InputError(key + ": " + list() + " sums to " + format_half_blocks(sum) + " blocks, but model.layers is " + std::to_string(layers) +
                     " (the counts must add up to it)");
  }
}

namespace {

// Units are the embedding, the halves of at least one block, and the head.
void check_unit_count(const ModelCosts& costs) {
  if (costs.units.size() < 4 || costs.units.size() % 2 != 0) {
    throw InputError(
        "partition: costs need the embedding, both halves of every block (at least one) and the "
        "head, got " + std::to_string(costs.units.size()) + " units");
  }
}

// evaluate_partition with the schedule's dependencies resolved once (`sim` is built from
// the compute-only `schedule`).
PartitionEval evaluate_with(const Schedule& schedule, const StageSimulator& sim, const ModelCosts& costs,
                            const std::vector<int>& halves, double message_us) {
  const int S = schedule.model_stages();
  check_unit_count(costs);
  check_partition(halves, costs.blocks(), S);
  const StageSums sums(costs, S);
  PartitionEval e;
  e.halves_per_stage = halves;
  std::vector<double> act, params;
  for (int s = 0, a = 0; s < S; a += halves[s], ++s) {
    const int b = a + halves[s];
    double f = 0.0, i = 0.0, w = 0.0;
    for (int u = a + 1; u <= b; ++u) {  // unit u is half block u - 1
      f += costs.units[u].f_us;
      i += costs.units[u].i_us;
      w += costs.units[u].w_us;
    }
    for (const UnitCost* end : {s == 0 ? &costs.units.front() : nullptr, s == S - 1 ? &costs.units.back() : nullptr}) {
      if (!end) continue;
      f += end->f_us;
      i += end->i_us;
      w += end->w_us;
    }
    e.stage_f_us.push_back(f);
    e.stage_i_us.push_back(i);
    e.stage_w_us.push_back(w);
    act.push_back(sums.activation(s, a, b));
    params.push_back(sums.params(s, a, b));
  }
  e.sim = sim.run(StageCosts::from_fiw(e.stage_f_us, e.stage_i_us, e.stage_w_us, message_us));
  e.rank_memory_bytes = rank_memory(schedule, act, params);
  return e;
}

}  // namespace

PartitionEval evaluate_partition(const Schedule& schedule, const ModelCosts& costs,
                                 const std::vector<int>& halves, double message_us) {
  const Schedule compute = has_communication(schedule) ? strip_communication(schedule) : schedule;
  return evaluate_with(compute, StageSimulator(compute), costs, halves, message_us);
}

PartitionResult auto_partition(const PartitionRequest& req) {
  const Schedule schedule = make_schedule(req.spec);
  const int S = schedule.model_stages();
  check_unit_count(req.costs);
  const int L = req.costs.halves();
  if (L < S) {
    throw InputError("partition: " + std::to_string(req.costs.blocks()) + " blocks cannot fill " +
                     std::to_string(S) + " model stages (every model stage needs at least half a block)");
  }
  if (req.memory_limit_bytes && !(*req.memory_limit_bytes > 0)) {
    throw InputError("partition: the memory limit must be > 0 bytes");
  }
  const StageSums sums(req.costs, S);
  const std::vector<int> peaks = chunk_peaks(schedule);
  const StageSimulator sim(schedule);
  const auto evaluate = [&](const std::vector<int>& halves) {
    return evaluate_with(schedule, sim, req.costs, halves, req.message_us);
  };

  PartitionResult result;
  const int blocks = req.costs.blocks();
  if (blocks >= S) {
    result.uniform = evaluate(uniform_partition(blocks, S));
    result.uniform_fits = fits(result.uniform, req.memory_limit_bytes);
  } else {
    result.uniform_fits = false;  // fewer blocks than stages: no whole-block split exists
  }

  // 1. DP candidates. Each stage alone within the limit is necessary; with several chunks
  //    per rank a rank holds several stages, so also try the limit shared by the chunks
  //    (sufficient: the chunks' peaks add up to at most the limit).
  std::vector<double> stage_limits{req.memory_limit_bytes.value_or(kInf)};
  if (req.memory_limit_bytes && schedule.chunks_per_rank() > 1) {
    stage_limits.push_back(*req.memory_limit_bytes / schedule.chunks_per_rank());
  }
  std::optional<PartitionEval> best;
  if (result.uniform_fits) best = result.uniform;
  for (double limit : stage_limits) {
    const auto stage_fits = [&](int s, int a, int b) {
      return sums.params(s, a, b) + peaks[s] * sums.activation(s, a, b) <= limit;
    };
    const auto cap = min_bottleneck(S, L, sums, stage_fits);
    if (!cap) continue;
    const auto halves = most_even(S, L, sums, *cap * (1.0 + 1e-12), stage_fits);
    if (!halves) continue;
    PartitionEval e = evaluate(*halves);
    if (!fits(e, req.memory_limit_bytes)) continue;
    if (!best || shorter(e, *best)) best = std::move(e);
  }
  if (!best) {
    const double need = min_stage_memory(S, L, sums, peaks);
    throw InputError("partition: no split of " + std::to_string(blocks) + " blocks over " + std::to_string(S) +
                     " model stages fits the memory limit of " + format_bytes(*req.memory_limit_bytes) +
                     " per rank; the smallest split needs at least " + format_bytes(need) +
                     " on one rank (raise the limit, add stages or use fewer micro-batches in flight)");
  }

  // 2. Local search: one half block across one boundary at a time, best move first.
  for (int round = 0; round < kMaxRounds; ++round) {
    std::optional<PartitionEval> move;
    for (int s = 0; s + 1 < S; ++s) {
      for (int dir : {-1, 1}) {  // -1: stage s gives a half to s + 1; +1: takes one
        std::vector<int> halves = best->halves_per_stage;
        halves[s] += dir;
        halves[s + 1] -= dir;
        if (halves[s] < 1 || halves[s + 1] < 1) continue;
        PartitionEval e = evaluate(halves);
        if (!fits(e, req.memory_limit_bytes)) continue;
        if (shorter(e, move ? *move : *best)) move = std::move(e);
      }
    }
    if (!move) break;
    best = std::move(move);
  }

  result.chosen = std::move(*best);
  result.halves_per_stage = result.chosen.halves_per_stage;
  result.explanation = explain(req, schedule, result);
  return result;
}

std::string format_half_blocks(long long halves) {
  const long long magnitude = halves < 0 ? -halves : halves;
  return (halves < 0 ? "-" : "") + std::to_string(magnitude / 2) + (magnitude % 2 ? ".5" : "");
}

std::string format_partition(const std::vector<int>& halves) {
  std::string s = "[";
  for (std::size_t k = 0; k < halves.size(); ++k)
    s += (k ? ", " : "") + format_half_blocks(halves[k]);
  return s + "]";
}

}  // namespace conveyor::sched
