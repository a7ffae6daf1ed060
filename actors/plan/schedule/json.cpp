#include "actors/plan/schedule/json.hpp"

#include <limits>
#include <nlohmann/json.hpp>

#include "kernels/common/error.hpp"

namespace conveyor::sched {
namespace {

int get_int(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j.at(key).is_number_integer()) {
    throw InputError(std::string("schedule JSON: \"") + key + "\" must be an integer");
  }
  const auto v = j.at(key).get<std::int64_t>();  // (a u64 above INT64_MAX reads negative)
  if (v < 0 || v > std::numeric_limits<int>::max())
    throw InputError(std::string("schedule JSON: \"") + key + "\" = " + j.at(key).dump() +
                     " is out of range (0 to " + std::to_string(std::numeric_limits<int>::max()) + ")");
  return static_cast<int>(v);
}

}  // namespace

void to_json(nlohmann::json& j, const Schedule& s) {
  const bool show_chunk = s.chunks_per_rank() > 1;
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& list : s.ranks) {
    nlohmann::json row = nlohmann::json::array();
    for (const Action& a : list) row.push_back(a.str(show_chunk));
    ranks.push_back(std::move(row));
  }
  j = nlohmann::json{{"name", s.spec.name},
                     {"stages", s.spec.stages},
                     {"micro_batches", s.spec.micro_batches},
                     {"virtual_stages", s.spec.virtual_stages},
                     {"ranks", std::move(ranks)}};
}

void from_json(const nlohmann::json& j, Schedule& s) {
  if (!j.is_object()) throw InputError("schedule JSON: expected an object");
  if (!j.contains("name") || !j.at("name").is_string()) {
    throw InputError("schedule JSON: \"name\" must be a string");
  }
  s.spec.name = j.at("name").get<std::string>();
  s.spec.stages = get_int(j, "stages");
  s.spec.micro_batches = get_int(j, "micro_batches");
  s.spec.virtual_stages = j.contains("virtual_stages") ? get_int(j, "virtual_stages") : 1;
  if (!j.contains("ranks") || !j.at("ranks").is_array()) {
    throw InputError("schedule JSON: \"ranks\" must be an array of arrays of action strings");
  }
  s.ranks.clear();
  for (const auto& row : j.at("ranks")) {
    const int rank = static_cast<int>(s.ranks.size());
    if (!row.is_array()) throw InputError("schedule JSON: ranks[" + std::to_string(rank) + "] must be an array");
    auto& list = s.ranks.emplace_back();
    for (const auto& cell : row) {
      if (!cell.is_string()) {
        throw InputError("schedule JSON: ranks[" + std::to_string(rank) + "] holds a non-string");
      }
      const Action a = Action::parse(cell.get<std::string>());
      if (a.stage != rank) {
        throw InputError("schedule JSON: " + a.str() + " is an action of rank " + std::to_string(a.stage) +
                         " in ranks[" + std::to_string(rank) + "]");
      }
      list.push_back(a);
    }
  }
}

std::string to_json(const Schedule& s, int indent) {
  nlohmann::json j;
  to_json(j, s);
  return j.dump(indent);
}

Schedule from_json(std::string_view text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(std::string("schedule JSON: ") + e.what());
  }
  Schedule s;
  from_json(j, s);
  return s;
}

}  // namespace conveyor::sched
