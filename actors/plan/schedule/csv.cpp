#include "actors/plan/schedule/csv.hpp"

#include <algorithm>

#include "kernels/common/error.hpp"

namespace conveyor::sched {
namespace {

std::vector<std::vector<Action>> read_rows(std::string_view text) {
  std::vector<std::vector<Action>> rows;
  std::size_t line_no = 0;
  while (!text.empty()) {
    const std::size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty() && line.front() == '#') continue;
    const int rank = static_cast<int>(rows.size());
    auto& row = rows.emplace_back();
    while (true) {
      const std::size_t comma = line.find(',');
      const std::string_view cell = line.substr(0, comma);
      if (cell.find_first_not_of(" \t") != std::string_view::npos) {
        Action a;
        try {
          a = Action::parse(cell);
        } catch (const InputError& e) {
          throw InputError("schedule CSV line " + std::to_string(line_no) + ": " + e.what());
        }
        if (a.stage != rank) {
          throw InputError("schedule CSV line " + std::to_string(line_no) + ": " + a.str() +
                           " is an action of rank " + std::to_string(a.stage) + " in the row of rank " +
                           std::to_string(rank));
        }
        row.push_back(a);
      }
      if (comma == std::string_view::npos) break;
      line.remove_prefix(comma + 1);
    }
  }
  return rows;
}

}  // namespace

std::string to_csv(const Schedule& s) {
  const bool show_chunk = s.chunks_per_rank() > 1;
  std::string out;
  for (const auto& list : s.ranks) {
    for (std::size_t k = 0; k < list.size(); ++k) {
      if (k) out += ',';
      out += list[k].str(show_chunk);
    }
    out += '\n';
  }
  return out;
}

Schedule from_csv(std::string_view text, const ScheduleSpec& spec) {
  Schedule s{spec, read_rows(text)};
  if (s.ranks.size() != static_cast<std::size_t>(spec.stages)) {
    throw InputError("schedule CSV has " + std::to_string(s.ranks.size()) + " rows for stages = " +
                     std::to_string(spec.stages) + " (one row per rank)");
  }
  return s;
}

Schedule from_csv(std::string_view text) {
  Schedule s{{"custom", 1, 1, 1}, read_rows(text)};
  s.spec.stages = std::max<int>(1, static_cast<int>(s.ranks.size()));
  s.ranks.resize(s.spec.stages);
  for (const auto& list : s.ranks) {
    for (const Action& a : list) {
      s.spec.micro_batches = std::max(s.spec.micro_batches, a.micro_batch + 1);
      s.spec.virtual_stages = std::max(s.spec.virtual_stages, a.chunk + 1);
    }
  }
  return s;
}

}  // namespace conveyor::sched
