#pragma once
// Cutting the model into model stages so that the simulated training step is shortest.
//
// The model is a row of layer units: unit 0 the embedding, units 1..2L the halves of the L
// transformer blocks (attention, MLP, attention, …: kernels/model/stage_slice.hpp), unit
// 2L+1 the head (final LayerNorm, LM head and loss). A partition gives each model stage
// (ranks × chunks per rank, schedule.model_stage() order) a contiguous run of at least one
// half block, counted in halves; model stage 0 also holds the embedding, the last one the
// head. Cutting between a block's halves balances the stages finer than whole blocks: the
// head costs about one block, which whole blocks cannot share out evenly. A
// stage's durations are the sums of its units' (B = I + W), and a rank's memory is the
// parameters of its chunks plus, at every point of its action list, the activations of the
// micro-batches in flight (from F until W, or B), each chunk's at its own size.
//
// auto_partition searches contiguous partitions:
//   1. a DP over half-block boundaries finds the smallest bottleneck (largest per-stage
//      F + I + W), then a second DP the most even partition with that bottleneck, both
//      keeping each model stage within the memory limit on its own;
//   2. that candidate and the uniform split are simulated (simulate_stages, stage_costs.hpp:
//      per-chunk durations, so interleaved and zbv see the real cost of each chunk);
//   3. a local search moves one half block across one boundary at a time while the simulated
//      step gets shorter and every rank's exact peak memory stays within the limit.
// The result is never slower than uniform in simulation when uniform fits the memory
// limit. O(S·L²) for the DPs, a few hundred simulations at most; L <= 128 blocks and
// S <= 16 model stages take well under a second.
// Pure logic: no CAF, no clock, deterministic.
#include <optional>
#include <string>
#include <vector>

#include "actors/plan/schedule/schedule.hpp"
#include "actors/plan/schedule/simulator.hpp"

namespace conveyor::sched {

/// What one layer unit costs per micro-batch.
struct UnitCost {
  double f_us = 0.0;  // forward
  double i_us = 0.0;  // backward for the input
  double w_us = 0.0;  // backward for the weights
  double activation_bytes = 0.0;  // held per micro-batch in flight (its stash)
  double param_bytes = 0.0;       // parameters, gradients and optimizer state

  double total_us() const { return f_us + i_us + w_us; }
};

/// Costs of every unit of the model, in model order: embedding, 2L half blocks (each
/// block's attention half, then its MLP half), head.
struct ModelCosts {
  std::vector<UnitCost> units;  // 2L + 2 entries
  std::string source;           // where they come from, for explanations ("measured ...")

  int halves() const { return static_cast<int>(units.size()) - 2; }
  int blocks() const { return halves() / 2; }
};

struct PartitionRequest {
  ScheduleSpec spec;
  ModelCosts costs;
  std::optional<double> memory_limit_bytes;  // per rank; none: unbounded
  double message_us = 0.0;                   // per message between ranks
};

/// A partition with its simulated step and memory.
struct PartitionEval {
  std::vector<int> halves_per_stage;  // per model stage, in half blocks
  std::vector<double> stage_f_us, stage_i_us, stage_w_us;  // per model stage
  std::vector<double> rank_memory_bytes;  // per rank: parameters + peak activations
  SimResult sim;

  double step_us() const { return sim.makespan; }
};

struct PartitionResult {
  std::vector<int> halves_per_stage;  // the choice, per model stage, in half blocks
  PartitionEval chosen;
  PartitionEval uniform;    // the uniform split, for comparison
  bool uniform_fits = true; // uniform is within the memory limit
  std::string explanation;  // what it chose and why, several sentences on one line
};

/// The uniform split, in half blocks per model stage: whole blocks as even as possible,
/// the earlier stages taking one more when `layers` does not divide: 7 blocks over 3 stages
/// are {6, 4, 4}.
/// The one definition of the uniform split: the default placement (pipeline_layout.hpp)
/// and the partitioner's baseline both use it, so they always agree.
/// Throws InputError unless 1 <= model_stages <= layers.
std::vector<int> uniform_partition(int layers, int model_stages);

/// Half blocks per model stage from whole blocks per model stage: {3, 2} -> {6, 4}.
std::vector<int> halves_of_blocks(const std::vector<int>& blocks);

/// Throws InputError naming `key` unless `halves` has `model_stages` entries, each >= 1,
/// summing to 2 * `layers`: "pipeline.partition: [3, 3, 2] has 3 entries, but …".
void check_partition(const std::vector<int>& halves, int layers, int model_stages,
                     const std::string& key = "pipeline.partition");

/// Simulates `halves` (checked with check_partition) on `schedule` (compute-only).
PartitionEval evaluate_partition(const Schedule& schedule, const ModelCosts& costs,
                                 const std::vector<int>& halves, double message_us = 0.0);

/// The partition with the shortest simulated step within the memory limit (see the top).
/// Throws InputError when the costs do not have 2 * blocks + 2 units, there are fewer half
/// blocks than model stages, or no partition fits the memory limit (the message gives the smallest
/// peak memory any partition needs).
PartitionResult auto_partition(const PartitionRequest& request);

/// A count of half blocks as blocks: 13 -> "6.5", -1 -> "-0.5".
std::string format_half_blocks(long long halves);

/// Half blocks per model stage as blocks: {6, 7, 5} -> "[3, 3.5, 2.5]".
std::string format_partition(const std::vector<int>& halves);

}  // namespace conveyor::sched
