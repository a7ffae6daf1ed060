#include "actors/trace/trace_plans.hpp"

#include <algorithm>
#include <limits>
#include <fmt/format.h>

#include "actors/plan/eval_plan.hpp"
#include "actors/plan/schedule/json.hpp"
#include "actors/plan/schedule/validator.hpp"
#include "actors/trace/trace_record.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::trace {

std::vector<sched::Action> TracePlans::plan(int actor, bool eval, int micro_batch) const {
  const auto& plans = eval ? this->eval : train.ranks;
  const ReplicaLayout l = layout();
  if (actor < 0 || actor >= l.actors()) return {};
  if (eval && l.replica_of(actor) > 0) return {};  // replica 0 alone evaluates
  const auto rank = static_cast<std::size_t>(l.stage_of(actor));
  if (rank >= plans.size()) return {};
  if (!eval || eval_wave <= 0) return plans[rank];
  return eval_wave_of(plans[rank], eval_wave, micro_batch);
}

nlohmann::json trace_plans_json(const sched::Schedule& train,
                                const std::vector<std::vector<sched::Action>>& eval,
                                int eval_wave, int replicas) {
  nlohmann::json ev = nlohmann::json::array();
  const bool show_chunk = train.chunks_per_rank() > 1;
  for (const auto& rank : eval) {
    nlohmann::json row = nlohmann::json::array();
    for (const auto& a : rank) row.push_back(a.str(show_chunk));
    ev.push_back(std::move(row));
  }
  nlohmann::json j;
  j["version"] = 1;
  j["train"] = train;
  j["eval"] = std::move(ev);
  j["eval_wave"] = eval_wave;
  if (replicas > 1) j["replicas"] = replicas;
  return j;
}

TracePlans parse_trace_plans(const std::string& text, const std::string& name) {
  try {
    const auto j = nlohmann::json::parse(text);
    if (!j.is_object() || !j.contains("train") || !j.contains("eval") || !j["eval"].is_array())
      throw InputError("expected an object with \"train\" and \"eval\"");
    if (j.value("version", 0) != 1) throw InputError("version must be 1");
    TracePlans p;
    p.train = j["train"].get<sched::Schedule>();
    for (const auto& row : j["eval"]) {
      auto& list = p.eval.emplace_back();
      if (!row.is_array()) throw InputError("\"eval\" must hold arrays of actions");
      for (const auto& cell : row) list.push_back(sched::Action::parse(cell.get<std::string>()));
    }
    if (p.train.ranks.size() != static_cast<std::size_t>(p.train.spec.stages))
      throw InputError("the train schedule does not list every rank");
    sched::validate(p.train);  // what the run validated before it ran
    if (j.contains("eval_wave")) {
      if (!j["eval_wave"].is_number_integer() || j["eval_wave"].get<std::int64_t>() < 1 ||
          j["eval_wave"].get<std::int64_t>() > std::numeric_limits<int>::max())
        throw InputError("\"eval_wave\" must be an integer in [1, " +
                         std::to_string(std::numeric_limits<int>::max()) + "]");
      p.eval_wave = j["eval_wave"].get<int>();
    }
    if (j.contains("replicas")) {
      // Records name their stage actor in 16 bits: no run has more actors than that.
      const std::int64_t most = kMaxTracedActors / std::max(1, p.train.spec.stages);
      if (!j["replicas"].is_number_integer() || j["replicas"].get<std::int64_t>() < 1 ||
          j["replicas"].get<std::int64_t>() > most)
        throw InputError(fmt::format(
            "\"replicas\" must be an integer in [1, {}] ({} stage actors at most, {} per replica)",
            most, kMaxTracedActors, p.train.spec.stages));
      p.replicas = j["replicas"].get<int>();
    }
    return p;
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", name, e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not a plans document ({})", name, e.what()));
  }
}

}  // namespace conveyor::trace
