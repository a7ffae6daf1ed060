#pragma once
// Schedules as CSV, the form of the golden files in the tests and of `conveyor sched`:
//   # optional comment lines start with '#'
//   0F0,0F1,0B0,0F2,0B1,0F3,0B2,0B3
//   1F0,1B0,1F1,1B1,1F2,1B2,1F3,1B3
// One row per rank (row r is rank r, an empty row is a rank with no actions), cells are
// action strings (action.hpp), an empty cell is nothing. With several chunks per rank every
// cell carries its chunk ("0F0c0"). Whitespace around cells is ignored.
#include <string>
#include <string_view>

#include "actors/plan/schedule/schedule.hpp"

namespace conveyor::sched {

/// One line per rank, each ended by '\n'.
std::string to_csv(const Schedule& schedule);

/// Reads the rows under `spec`; throws InputError when the row count is not spec.stages,
/// a cell does not parse, or a cell names another rank than its row. Does not validate().
Schedule from_csv(std::string_view text, const ScheduleSpec& spec);

/// Reads the rows and infers the spec: name "custom" (looped placement), stages = rows,
/// micro_batches = largest micro-batch + 1, virtual_stages = largest chunk + 1.
Schedule from_csv(std::string_view text);

}  // namespace conveyor::sched
