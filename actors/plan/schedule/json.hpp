#pragma once
// Schedules as JSON (nlohmann-json), for run folders, traces and tools:
//   {"name": "1f1b", "stages": 2, "micro_batches": 4, "virtual_stages": 1,
//    "ranks": [["0F0", "0F1", "0B0", …], ["1F0", "1B0", …]]}
// Cells are action strings (action.hpp), with the chunk suffix when there are several
// chunks per rank. from_json checks the form only, not the schedule (see validate()).
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "actors/plan/schedule/schedule.hpp"

namespace conveyor::sched {

std::string to_json(const Schedule& schedule, int indent = 2);
/// Throws InputError on malformed JSON, missing or mistyped fields, a bad action string,
/// or an action in another rank's list.
Schedule from_json(std::string_view text);

// nlohmann-json conversions, so a schedule can sit inside a larger document.
void to_json(nlohmann::json& j, const Schedule& schedule);
void from_json(const nlohmann::json& j, Schedule& schedule);

}  // namespace conveyor::sched
