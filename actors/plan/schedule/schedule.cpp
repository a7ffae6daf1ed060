#include "actors/plan/schedule/schedule.hpp"

#include <algorithm>

#include "actors/plan/schedule/generators.hpp"
#include "actors/plan/schedule/validator.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::sched {
namespace {

std::string known_names() {
  std::string s;
  for (const auto& n : schedule_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

[[noreturn]] void bad_spec(const ScheduleSpec& spec, const std::string& why) {
  throw InputError("schedule " + spec.name + ": " + why);
}

}  // namespace

std::int64_t schedule_chunks(std::string_view name, std::int64_t virtual_stages) {
  return name == "zbv" ? 2 : virtual_stages;
}

std::int64_t spec_chunks(const ScheduleSpec& spec) { return schedule_chunks(spec.name, spec.virtual_stages); }

std::int64_t schedule_cells(const ScheduleSpec& spec) {
  return std::int64_t{spec.stages} * spec.micro_batches * spec_chunks(spec);
}

int Schedule::chunks_per_rank() const {
  return static_cast<int>(std::max<std::int64_t>(1, spec_chunks(spec)));
}

int Schedule::model_stages() const { return spec.stages * chunks_per_rank(); }

int Schedule::model_stage(int rank, int chunk) const {
  const int p = spec.stages;
  if (spec.name == "zbv") return chunk == 0 ? rank : 2 * p - 1 - rank;
  return chunk * p + rank;
}

RankChunk Schedule::holder(int stage) const {
  const int p = spec.stages;
  if (spec.name == "zbv") return stage < p ? RankChunk{stage, 0} : RankChunk{2 * p - 1 - stage, 1};
  return {stage % p, stage / p};
}

std::size_t Schedule::max_rank_length() const {
  std::size_t n = 0;
  for (const auto& list : ranks) n = std::max(n, list.size());
  return n;
}

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names{"gpipe", "1f1b", "interleaved-1f1b", "zb-h1",
                                              "zbv"};
  return names;
}

void validate_spec(const ScheduleSpec& spec) {
  const auto& names = schedule_names();
  if (std::find(names.begin(), names.end(), spec.name) == names.end()) {
    throw InputError("schedule: unknown name \"" + spec.name + "\" (known: " + known_names() +
                     ")");
  }
  if (spec.stages < 1) bad_spec(spec, "pipeline.stages = " + std::to_string(spec.stages) + " must be >= 1");
  if (spec.micro_batches < 1) {
    bad_spec(spec, "pipeline.micro_batches = " + std::to_string(spec.micro_batches) + " must be >= 1");
  }
  const std::string v = "pipeline.virtual_stages = " + std::to_string(spec.virtual_stages);
  if (spec.name == "interleaved-1f1b") {
    if (spec.virtual_stages < 2) bad_spec(spec, v + " must be >= 2 (chunks per rank)");
    if (spec.micro_batches % spec.stages != 0) {
      bad_spec(spec, "pipeline.micro_batches = " + std::to_string(spec.micro_batches) +
                         " must be a multiple of pipeline.stages = " + std::to_string(spec.stages));
    }
  } else if (spec.name == "zbv") {
    if (spec.virtual_stages != 1 && spec.virtual_stages != 2) {
      bad_spec(spec, v + " must be 1 or 2 (zbv always runs 2 chunks per rank)");
    }
  } else if (spec.virtual_stages != 1) {
    bad_spec(spec, v + " must be 1 (only interleaved-1f1b and zbv run several chunks per rank)");
  }
  const std::int64_t cells = schedule_cells(spec);
  if (cells > kMaxScheduleCells)
    bad_spec(spec, "pipeline.stages x pipeline.micro_batches x chunks per rank = " + std::to_string(cells) +
                       " is more than " + std::to_string(kMaxScheduleCells) +
                       " (the schedule, its checks and its simulation hold every action)");
}

Schedule make_schedule(const ScheduleSpec& spec) {
  validate_spec(spec);
  Schedule s;
  if (spec.name == "gpipe") {
    s = make_gpipe(spec);
  } else if (spec.name == "1f1b") {
    s = make_one_f_one_b(spec);
  } else if (spec.name == "interleaved-1f1b") {
    s = make_interleaved(spec);
  } else if (spec.name == "zb-h1") {
    s = make_zero_bubble_h1(spec);
  } else {
    s = make_zero_bubble_v(spec);
  }
  validate(s);
  return s;
}

}  // namespace conveyor::sched
