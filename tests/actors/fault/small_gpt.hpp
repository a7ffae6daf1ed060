#pragma once
// The small GPT the snapshot tests of actors/fault cut and restore: 3 blocks of 16, so that
// a state has every kind of tensor and still takes microseconds; its plans over a layout of
// halves, and each rank's CPU model of one.
#include <cstdint>
#include <memory>
#include <vector>

#include "actors/plan/job_plan.hpp"
#include "actors/plan/pipeline_layout.hpp"
#include "kernels/model/stage_model.hpp"
#include "kernels/model/gpt_config.hpp"

namespace conveyor::fault_test {

inline GptConfig small_model() {
  GptConfig c;
  c.layers = 3;
  c.d_model = 16;
  c.heads = 2;
  c.seq_len = 8;
  c.vocab = 32;
  return c;
}

/// The small GPT's 1F1B plan over `halves` (blocks' halves per stage), 4 micro-batches
/// over `replicas`.
inline JobPlan plan_of(const std::vector<int>& halves, int replicas = 1) {
  JobPlan plan;
  plan.model = small_model();
  plan.data.micro_batches = 4;
  plan.replicas = replicas;
  const sched::ScheduleSpec spec{"1f1b", static_cast<int>(halves.size()), 4 / replicas, 1};
  auto layout = make_pipeline_layout(spec, 3, halves);
  plan.schedule = layout.schedule;
  plan.placement = layout.placement;
  return plan;
}

/// Each rank's CPU model of `plan` (one chunk per rank here), seeded with `seed`.
inline std::vector<std::unique_ptr<StageModel>> models_of(const JobPlan& plan, std::uint64_t seed) {
  std::vector<std::unique_ptr<StageModel>> out;
  for (const auto& rank : plan.placement.ranks) out.push_back(make_cpu_stage_model(plan.model, rank.chunks.at(0).slice, seed));
  return out;
}

}  // namespace conveyor::fault_test
