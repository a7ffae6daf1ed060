#pragma once
// Cutting the model into model stages so that the simulated training step is shortest.
//
// The model is a row of layer units: unit 0 the embedding, units 1..L the transformer
// blocks, unit L+1 the head (final LayerNorm, LM head and loss). A partition gives each
// model stage (ranks × chunks per rank, schedule.model_stage() order) a contiguous run of
// at least one block; model stage 0 also holds the embedding, the last one the head. A
// stage's durations are the sums of its units' (B = I + W), and a rank's memory is the
// parameters of its chunks plus, at every point of its action list, the activations of the
// micro-batches in flight (from F until W, or B), each chunk's at its own size.
//
// auto_partition searches contiguous partitions:
//   1. a DP over block boundaries finds the smallest bottleneck (largest per-stage
//      F + I + W), then a second DP the most even partition with that bottleneck, both
//      keeping each model stage within the memory limit on its own;
//   2. that candidate and the uniform split are simulated (simulate_stages, stage_costs.hpp:
//      per-chunk durations, so interleaved and zbv see the real cost of each chunk);
//   3. a local search moves one block across one boundary at a time while the simulated
//      step gets shorter and every rank's exact peak memory stays within the limit.
// The result is never slower than uniform in simulation when uniform fits the memory
// limit. O(S·L²) for the DPs, a few hundred simulations at most; L <= 128 blocks and
// S <= 16 model stages take well under a second.
// Pure logic: no CAF, no clock, deterministic.
#include <optional>
#include <string>
#include <vector>

#include "actors/schedule/schedule.hpp"
#include "actors/schedule/simulator.hpp"

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

/// Costs of every unit of the model, in model order: embedding, L blocks, head.
struct ModelCosts {
  std::vector<UnitCost> units;  // L + 2 entries
  std::string source;           // where they come from, for explanations ("measured ...")

  int blocks() const { return static_cast<int>(units.size()) - 2; }
};

struct PartitionRequest {
  ScheduleSpec spec;
  ModelCosts costs;
  std::optional<double> memory_limit_bytes;  // per rank; none: unbounded
  double message_us = 0.0;                   // per message between ranks
};

/// A partition with its simulated step and memory.
struct PartitionEval {
  std::vector<int> blocks_per_stage;  // per model stage
  std::vector<double> stage_f_us, stage_i_us, stage_w_us;  // per model stage
  std::vector<double> rank_memory_bytes;  // per rank: parameters + peak activations
  SimResult sim;

  double step_us() const { return sim.makespan; }
};

struct PartitionResult {
  std::vector<int> blocks_per_stage;  // the choice, per model stage
  PartitionEval chosen;
  PartitionEval uniform;    // the uniform split, for comparison
  bool uniform_fits = true; // uniform is within the memory limit
  std::string explanation;  // what it chose and why, several sentences on one line
};

/// Blocks per model stage, as even as possible, the earlier stages taking the remainder
/// (the same rule as placement.hpp's uniform_block_counts).
/// REQUIRES: 1 <= model_stages <= layers.
std::vector<int> uniform_partition(int layers, int model_stages);

/// Throws InputError naming `key` unless `blocks` has `model_stages` entries, each >= 1,
/// summing to `layers`: "pipeline.partition: 3 entries, but 4 stages × 1 chunk need 4".
void check_partition(const std::vector<int>& blocks, int layers, int model_stages,
                     const std::string& key = "pipeline.partition");

/// Simulates `blocks` (checked with check_partition) on `schedule` (compute-only).
PartitionEval evaluate_partition(const Schedule& schedule, const ModelCosts& costs,
                                 const std::vector<int>& blocks, double message_us = 0.0);

/// The partition with the shortest simulated step within the memory limit (see the top).
/// Throws InputError when the costs do not have blocks + 2 units, there are fewer blocks
/// than model stages, or no partition fits the memory limit (the message gives the smallest
/// peak memory any partition needs).
PartitionResult auto_partition(const PartitionRequest& request);

/// "[3, 3, 2, 0]".
std::string format_blocks(const std::vector<int>& blocks);

}  // namespace conveyor::sched
