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
                                int eval_wave, int replicas, const LayoutPlace& place) {
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
  if (place.generation > 0) {
    j.erase("version");  // an entry of "relayouts", inside a versioned document
    j["generation"] = place.generation;
  }
  if (!place.node_of_actor.empty()) j["node_of_actor"] = place.node_of_actor;
  return j;
}

void add_relayout(nlohmann::json& doc, nlohmann::json layout) {
  if (!doc.contains("relayouts")) doc["relayouts"] = nlohmann::json::array();
  doc["relayouts"].push_back(std::move(layout));
}

namespace {

// One layout's plans: the document's top level, or an entry of its "relayouts".
TracePlans parse_layout(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("train") || !j.contains("eval") || !j["eval"].is_array())
    throw InputError("expected an object with \"train\" and \"eval\"");
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
  if (j.contains("node_of_actor")) {
    const auto& nodes = j["node_of_actor"];
    if (!nodes.is_array() || nodes.size() != static_cast<std::size_t>(p.layout().actors()))
      throw InputError(fmt::format("\"node_of_actor\" must list the node of each of the {} stage actors",
                                   p.layout().actors()));
    for (const auto& n : nodes) {
      if (!n.is_number_integer() || n.get<std::int64_t>() < 0 ||
          n.get<std::int64_t>() > std::numeric_limits<int>::max())
        throw InputError("\"node_of_actor\" must hold node ranks (integers >= 0)");
      p.node_of_actor.push_back(n.get<int>());
    }
  }
  return p;
}

}  // namespace

std::vector<TracePlans> parse_trace_layouts(const std::string& text, const std::string& name) {
  try {
    const auto j = nlohmann::json::parse(text);
    if (!j.is_object()) throw InputError("expected an object with \"train\" and \"eval\"");
    if (j.value("version", 0) != 1) throw InputError("version must be 1");
    std::vector<TracePlans> layouts{parse_layout(j)};
    if (!j.contains("relayouts")) return layouts;
    if (!j["relayouts"].is_array()) throw InputError("\"relayouts\" must be an array of layouts");
    for (const auto& entry : j["relayouts"]) {
      const int generation = static_cast<int>(layouts.size());
      try {
        TracePlans p = parse_layout(entry);
        // The trace's k-th replan or joined record switches to the k-th entry: a gap or a
        // repeat would pair rounds with another layout's plans.
        const auto g = entry.find("generation");
        if (g == entry.end() || !g->is_number_integer() || g->get<std::int64_t>() != generation)
          throw InputError(
              fmt::format("\"generation\" must be {} (the entries count the re-layouts from 1)", generation));
        p.generation = generation;
        layouts.push_back(std::move(p));
      } catch (const InputError& e) {
        throw InputError(fmt::format("\"relayouts\" entry {}: {}", generation - 1, e.what()));
      }
    }
    return layouts;
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", name, e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not a plans document ({})", name, e.what()));
  }
}

TracePlans parse_trace_plans(const std::string& text, const std::string& name) {
  return parse_trace_layouts(text, name).front();
}

}  // namespace conveyor::trace
