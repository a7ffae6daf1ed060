#include "actors/plan/schedule/grid.hpp"

#include <algorithm>

namespace conveyor::sched {
namespace {

bool marked(const std::vector<GridMark>& marks, std::size_t rank, std::size_t slot) {
  return std::any_of(marks.begin(), marks.end(), [&](const GridMark& m) {
    return static_cast<std::size_t>(m.rank) == rank && m.slot == slot;
  });
}

void pad_to(std::string& s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
}

}  // namespace

std::string render_grid(const Schedule& s, const std::vector<GridMark>& marks) {
  const bool show_chunk = s.chunks_per_rank() > 1;
  const std::size_t columns = s.max_rank_length();
  // cells[r][k], with the marks drawn; unmarked cells get two spaces either side so a
  // mark does not shift the columns.
  std::vector<std::vector<std::string>> cells(s.ranks.size());
  std::vector<std::size_t> width(columns, 0);
  for (std::size_t k = 0; k < columns; ++k) width[k] = 2 + std::to_string(k).size();
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    for (std::size_t k = 0; k < s.ranks[r].size(); ++k) {
      const std::string text = s.ranks[r][k].str(show_chunk);
      cells[r].push_back(marked(marks, r, k) ? "[*" + text + "*]" : "  " + text + "  ");
      width[k] = std::max(width[k], cells[r].back().size());
    }
  }
  const std::string label_last = "rank " + std::to_string(s.ranks.empty() ? 0 : s.ranks.size() - 1);
  const std::size_t label_width = label_last.size() + 1;  // a space before a marked cell

  std::string out(label_width, ' ');
  for (std::size_t k = 0; k < columns; ++k) {
    std::string head = "  " + std::to_string(k);
    pad_to(head, width[k]);
    out += head;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    std::string line = "rank " + std::to_string(r);
    pad_to(line, label_width);
    for (std::size_t k = 0; k < cells[r].size(); ++k) {
      std::string cell = cells[r][k];
      pad_to(cell, width[k]);
      line += cell;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += "\n" + line;
  }
  return out;
}

}  // namespace conveyor::sched
