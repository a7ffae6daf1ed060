#pragma once
// A pipeline schedule as plain data: per rank, the list of actions it runs in order.
//
// Invariants of a schedule from make_schedule (checked by validate(), see validator.hpp):
// - ranks.size() == spec.stages and every action in ranks[r] has stage == r;
// - per (rank, chunk, micro-batch) exactly one F and either one B or one I and one W;
// - every rank runs its W (or B) of a chunk in micro-batch order, which keeps gradient
//   accumulation, and so the weights, bitwise independent of the schedule;
// - the cross-rank data dependencies can be met (a dry run does not deadlock).
// Generators return compute-only schedules; add_communication() (comm_pass.hpp) adds the
// SEND/RECV actions. Pure logic: no CAF, CUDA or network.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actors/plan/schedule/action.hpp"

namespace conveyor::sched {

/// The most (rank, chunk, micro-batch) cells a schedule may have (validate_spec): each
/// holds up to three actions, which the validator and the simulator walk.
inline constexpr std::int64_t kMaxScheduleCells = std::int64_t{1} << 22;

struct ScheduleSpec {
  std::string name;        // one of schedule_names(), or "custom" for a loaded schedule
  int stages = 1;          // pipeline ranks
  int micro_batches = 1;
  int virtual_stages = 1;  // chunks per rank for interleaved-1f1b (>= 2); 1 elsewhere
};

/// Chunks per rank of the schedule `name` with `virtual_stages` as written: zbv always 2
/// (its V), the others `virtual_stages`. The one place that knows; unclamped so that a bad
/// value read from a file or a config can be named.
std::int64_t schedule_chunks(std::string_view name, std::int64_t virtual_stages);
/// The spec's chunks per rank (schedule_chunks), and its stages x micro-batches x chunks
/// cells, in 64 bits.
std::int64_t spec_chunks(const ScheduleSpec& spec);
std::int64_t schedule_cells(const ScheduleSpec& spec);

/// A (rank, chunk) pair: where one model stage lives.
struct RankChunk {
  int rank = 0;
  int chunk = 0;
  friend bool operator==(const RankChunk&, const RankChunk&) = default;
};

struct Schedule {
  ScheduleSpec spec;
  std::vector<std::vector<Action>> ranks;  // ranks[r] = rank r's actions in execution order

  /// 2 for zbv, else spec.virtual_stages (1 for gpipe, 1f1b, zb-h1).
  int chunks_per_rank() const;
  /// Model stages in the pipeline: stages × chunks_per_rank().
  int model_stages() const;
  /// Which model piece (0..model_stages()-1) a (rank, chunk) holds: chunk·p + rank (looped
  /// placement) for every schedule but zbv, whose V shape puts chunk 0 at rank and chunk 1
  /// at 2p−1−rank. REQUIRES: 0 <= rank < stages, 0 <= chunk < chunks_per_rank().
  int model_stage(int rank, int chunk) const;
  /// The inverse of model_stage(). REQUIRES: 0 <= model_stage < model_stages().
  RankChunk holder(int model_stage) const;
  /// The longest rank list.
  std::size_t max_rank_length() const;
};

/// {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zbv"}.
const std::vector<std::string>& schedule_names();

/// Checks the spec alone; throws InputError naming the bad field, its value and what is
/// allowed (e.g. micro_batches must be a multiple of stages for interleaved-1f1b).
void validate_spec(const ScheduleSpec& spec);

/// Validates the spec, runs the named generator, validates the result (validate()).
/// The result is compute-only: F, B (gpipe, 1f1b, interleaved-1f1b) or F, I, W (zb-h1, zbv).
Schedule make_schedule(const ScheduleSpec& spec);

}  // namespace conveyor::sched
