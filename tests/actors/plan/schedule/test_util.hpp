#pragma once
// Helpers shared by the schedule tests.
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "actors/plan/schedule/action.hpp"
#include "actors/plan/schedule/schedule.hpp"

namespace conveyor::sched::test {

inline std::string read_golden(const std::string& name) {
  const std::string path = std::string(CONVEYOR_SOURCE_DIR) + "/tests/actors/plan/schedule/golden/" + name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// "F0 I0 W0" on rank r → actions of rank r (cells without the rank prefix).
inline std::vector<Action> rank_list(int rank, std::string_view cells) {
  std::vector<Action> out;
  std::istringstream in{std::string(cells)};
  for (std::string cell; in >> cell;) out.push_back(Action::parse(std::to_string(rank) + cell));
  return out;
}

/// A custom schedule from one string per rank, cells without the rank prefix.
inline Schedule custom(int micro_batches, const std::vector<std::string>& rows,
                       int virtual_stages = 1) {
  Schedule s{{"custom", static_cast<int>(rows.size()), micro_batches, virtual_stages}, {}};
  for (std::size_t r = 0; r < rows.size(); ++r) s.ranks.push_back(rank_list(static_cast<int>(r), rows[r]));
  return s;
}

/// Specs for every generator over a range of p, m (and v): the ones each accepts.
inline std::vector<ScheduleSpec> all_specs(int max_p = 8, int max_m = 24) {
  std::vector<ScheduleSpec> specs;
  for (int p = 1; p <= max_p; ++p) {
    for (int m = 1; m <= max_m; ++m) {
      for (const char* name : {"gpipe", "1f1b", "zb-h1", "zbv"}) specs.push_back({name, p, m, 1});
      if (m % p == 0) {
        for (int v = 2; v <= 4; ++v) specs.push_back({"interleaved-1f1b", p, m, v});
      }
    }
  }
  return specs;
}

inline std::string describe(const ScheduleSpec& s) {
  return s.name + " p=" + std::to_string(s.stages) + " m=" + std::to_string(s.micro_batches) +
         " v=" + std::to_string(s.virtual_stages);
}

}  // namespace conveyor::sched::test
