// local_model_stages: the model stages whose tensors a resuming process reads, from the
// nodes the job's stage actors run on (apps/launch/replica_nodes.hpp).
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "apps/config/config_loader.hpp"
#include "apps/launch/replica_nodes.hpp"
#include "apps/train/job_builder.hpp"
#include "apps/train/resume_job.hpp"

using namespace conveyor;

namespace {

std::vector<std::set<int>> stages_by_node(std::vector<std::string> overrides, int nnodes) {
  overrides.push_back(std::string("data.path=") + CONVEYOR_SOURCE_DIR + "/data/tiny_corpus.txt");
  const RunConfig config = load_run_config("", overrides);
  const JobPlan plan = build_job_plan(config, nnodes);
  const auto nodes = node_of_actor(config, nnodes);
  std::vector<std::set<int>> out;
  for (int n = 0; n < nnodes; ++n) out.push_back(local_model_stages(plan, nodes, n));
  return out;
}

}  // namespace

TEST_CASE("each node reads the model stages of its own stage actors") {
  using Sets = std::vector<std::set<int>>;
  CHECK(stages_by_node({"pipeline.stages=4"}, 1) == Sets{{0, 1, 2, 3}});
  CHECK(stages_by_node({"pipeline.stages=4"}, 2) == Sets{{0, 1}, {2, 3}});
  CHECK(stages_by_node({"pipeline.stages=4"}, 4) == Sets{{0}, {1}, {2}, {3}});
  // ZBV: two chunks per rank in a V, rank 0 holding the first and the last model stage.
  CHECK(stages_by_node({"pipeline.stages=2", "pipeline.schedule=zbv"}, 2) == Sets{{0, 3}, {1, 2}});
  // Data parallelism, a replica per node: each reads the whole model.
  CHECK(stages_by_node({"pipeline.stages=2", "parallel.data=2"}, 2) == Sets{{0, 1}, {0, 1}});
}
