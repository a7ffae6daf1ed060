#pragma once
// The step × rank picture of a schedule, for error messages and `conveyor sched`:
// rows are ranks, columns are slot indices in each rank's list, cells are action strings.
// A marked cell reads [*2B1*].
//
//              0      1      2      3
//   rank 0   0F0    0F1    0B0    0B1
//   rank 1   1F0  [*1B1*]  1F1    1B0
#include <cstddef>
#include <string>
#include <vector>

#include "actors/plan/schedule/schedule.hpp"

namespace conveyor::sched {

struct GridMark {
  int rank = 0;
  std::size_t slot = 0;
};

/// The grid as lines of text (no trailing newline). Marks outside the lists are ignored.
std::string render_grid(const Schedule& schedule, const std::vector<GridMark>& marks = {});

}  // namespace conveyor::sched
