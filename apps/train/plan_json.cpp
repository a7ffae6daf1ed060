#include "apps/train/plan_json.hpp"

namespace conveyor {
namespace {

// A count of half blocks as blocks: an integer when whole (13 -> 6.5, 12 -> 6).
nlohmann::json blocks_value(int halves) {
  if (halves % 2 == 0) return halves / 2;
  return halves / 2.0;
}

}  // namespace

nlohmann::json plan_json(const JobPlan& plan, const std::vector<int>& node_of_actor) {
  using nlohmann::json;
  json stages = json::array();
  for (const auto& rank : plan.placement.ranks) {
    json layers = json::array();
    json chunks = json::array();
    for (const auto& c : rank.chunks) {
      auto names = slice_layer_names(c.slice);
      chunks.push_back({{"chunk", c.chunk},
                        {"model_stage", c.model_stage},
                        {"first_block", c.slice.first_block},
                        {"blocks", blocks_value(c.slice.num_halves())},
                        {"halves", c.slice.num_halves()},
                        {"layers", names}});
      for (auto& n : names) layers.push_back(n);
    }
    stages.push_back({{"stage", rank.rank},
                      {"replica", rank.replica},
                      {"device", rank.device.str()},
                      {"layers", layers},
                      {"chunks", chunks}});
  }
  // Every replica's stage actors (actors/plan/replica_placement.hpp): replica-major numbering.
  json replicas = json::array();
  const auto layout = plan.replica_layout();
  for (int r = 0; r < layout.replicas; ++r) {
    json actors = json::array();
    for (int s = 0; s < layout.stages; ++s) {
      const RankPlacement rank = plan.actor_placement(layout.actor(r, s));
      const auto share = plan.replica_share(r);
      json actor = {{"stage", rank.rank},
                    {"pipeline_stage", s},
                    {"device", rank.device.str()},
                    {"first_micro_batch", share.first},
                    {"micro_batches", share.count}};
      if (!node_of_actor.empty()) actor["node"] = node_of_actor.at(static_cast<std::size_t>(rank.rank));
      actors.push_back(std::move(actor));
    }
    json replica = {{"replica", r}, {"stages", actors}};
    if (plan.stands_for_configured()) replica["gradient_shares"] = plan.gradient_shares(r);
    replicas.push_back(std::move(replica));
  }
  std::vector<int> halves_per_stage;
  for (int s = 0; s < plan.placement.model_stages(); ++s)
    halves_per_stage.push_back(plan.placement.chunk_of(s).slice.num_halves());
  nlohmann::json out = {{"schedule", plan.schedule.spec.name},
          {"stages", plan.schedule.spec.stages},
          {"micro_batches", plan.schedule.spec.micro_batches},
          {"virtual_stages", plan.schedule.chunks_per_rank()},
          {"partition", plan.partition},
          {"blocks_per_stage", partition_json(halves_per_stage)},
          {"partition_reason", plan.partition_reason},
          {"placement", stages},
          {"data_parallel", plan.replicas},
          {"replicas", replicas}};
  // A job shrunk to fewer replicas: each computes this many configured replicas' shares
  // (one number when every replica computes as many, else one per replica), standing for
  // the configured replicas.
  if (plan.stands_for_configured()) {
    std::vector<int> shares;
    for (int r = 0; r < plan.replicas; ++r) shares.push_back(plan.gradient_shares(r));
    if (shares.front() == shares.back()) out["gradient_shares"] = shares.front();
    else out["gradient_shares"] = shares;
    out["configured_replicas"] = plan.configured_replicas;
  }
  return out;
}

nlohmann::json partition_json(const std::vector<int>& halves) {
  nlohmann::json out = nlohmann::json::array();
  for (int h : halves) out.push_back(blocks_value(h));
  return out;
}

}  // namespace conveyor
