#include <doctest/doctest.h>

#include <string>

#include "actors/plan/schedule/csv.hpp"
#include "test_util.hpp"

using namespace conveyor::sched;

namespace {

// The golden file without its comment lines: what to_csv must write.
std::string rows_only(const std::string& text) {
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t eol = text.find('\n', pos);
    const std::string line = text.substr(pos, eol - pos);
    if (line.empty() || line[0] != '#') out += line + "\n";
    pos = eol == std::string::npos ? text.size() : eol + 1;
  }
  return out;
}

void check_golden(const ScheduleSpec& spec, const std::string& file) {
  const std::string text = test::read_golden(file);
  const Schedule made = make_schedule(spec);
  CHECK(from_csv(text, spec).ranks == made.ranks);
  CHECK(to_csv(made) == rows_only(text));
}

}  // namespace

TEST_CASE("1F1B for p=2, m=4 matches its golden CSV") {
  check_golden({"1f1b", 2, 4, 1}, "1f1b_p2_m4.csv");
  const Schedule s = make_schedule({"1f1b", 2, 4, 1});
  CHECK(s.ranks[0] == test::rank_list(0, "F0 F1 B0 F2 B1 F3 B2 B3"));
  CHECK(s.ranks[1] == test::rank_list(1, "F0 B0 F1 B1 F2 B2 F3 B3"));
}

TEST_CASE("Interleaved 1F1B for p=2, m=4, v=2 matches its golden CSV") {
  check_golden({"interleaved-1f1b", 2, 4, 2}, "interleaved_p2_m4_v2.csv");
  const Schedule s = make_schedule({"interleaved-1f1b", 2, 4, 2});
  CHECK(s.ranks[0] == test::rank_list(0, "F0c0 F1c0 F0c1 F1c1 F2c0 B0c1 F3c0 B1c1 F2c1 B0c0 F3c1 "
                                         "B1c0 B2c1 B3c1 B2c0 B3c0"));
}

TEST_CASE("ZB-H1 for p=4, m=8 matches its golden CSV, rank 3 as the zero-bubble paper draws it") {
  check_golden({"zb-h1", 4, 8, 1}, "zb_h1_p4_m8.csv");
  const Schedule s = make_schedule({"zb-h1", 4, 8, 1});
  CHECK(s.ranks[3] == test::rank_list(3, "F0 I0 F1 I1 F2 I2 F3 I3 W0 F4 I4 W1 F5 I5 W2 F6 I6 W3 "
                                         "F7 I7 W4 W5 W6 W7"));
}
