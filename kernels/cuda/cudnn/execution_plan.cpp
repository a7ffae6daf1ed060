#if CONVEYOR_WITH_CUDNN
#include "kernels/cuda/cudnn/execution_plan.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "kernels/cuda/cudnn/cudnn_check.hpp"

namespace conveyor::cudnn {
namespace {

struct EngineInfo {
  std::int64_t index = -1;
  bool deterministic = false;
};

// The engine behind an engine configuration. Throws CudaError when cuDNN cannot say.
EngineInfo engine_of(const BackendDescriptor& config) {
  BackendDescriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine of " + config.label());
  cudnnBackendDescriptor_t raw = engine.get();
  CUDNN_GET(config, CUDNN_ATTR_ENGINECFG_ENGINE, std::span<cudnnBackendDescriptor_t>(&raw, 1));
  EngineInfo info;
  CUDNN_GET(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, std::span<std::int64_t>(&info.index, 1));
  // Room for notes of releases newer than the headers; more than that is a failure.
  std::array<cudnnBackendNumericalNote_t, 32> notes{};
  const std::int64_t n = engine.get_raw(CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                        "CUDNN_ATTR_ENGINE_NUMERICAL_NOTE",
                                        CUDNN_TYPE_NUMERICAL_NOTE,
                                        static_cast<std::int64_t>(notes.size()), notes.data());
  if (n > static_cast<std::int64_t>(notes.size()))
    throw CudaError("cuDNN engine " + std::to_string(info.index) + " has " + std::to_string(n) +
                    " numerical notes, more than conveyor reads");
  info.deterministic = std::find(notes.begin(), notes.begin() + n,
                                 CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) == notes.begin() + n;
  return info;
}

// The engine configurations the heuristics offer in one mode, best first. They are read
// while the heuristics descriptor that filled them is alive, as cudnn-frontend does.
struct Offer {
  BackendDescriptor heuristics;
  std::vector<BackendDescriptor> configs;
};

Offer offered_configs(const BackendDescriptor& op_graph, cudnnBackendHeurMode_t mode,
                      const std::string& mode_name, std::string& report) {
  Offer offer{BackendDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, mode_name), {}};
  BackendDescriptor& heur = offer.heuristics;
  CUDNN_SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, op_graph.get());
  CUDNN_SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, mode);
  heur.finalize();
  const std::int64_t count = heur.get_raw(CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                          "CUDNN_ATTR_ENGINEHEUR_RESULTS",
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, nullptr);
  std::vector<cudnnBackendDescriptor_t> raw;
  for (std::int64_t i = 0; i < count; ++i) {
    offer.configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                               "engine config " + std::to_string(i) + " of " + mode_name);
    raw.push_back(offer.configs.back().get());
  }
  const std::int64_t got = count == 0 ? 0
                                      : CUDNN_GET(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                  std::span<cudnnBackendDescriptor_t>(raw));
  report += mode_name + ": " + std::to_string(count) + " offered";
  // Configurations that fail cuDNN's support check while the results are filled are dropped;
  // the last-error string says which check each failed.
  if (got < count) {
    const std::string why = detail::cudnn_last_error();
    report += ", " + std::to_string(count - got) + " failed cuDNN's support check" +
              (why.empty() ? "" : " (" + why + ")");
    offer.configs.resize(static_cast<std::size_t>(std::max<std::int64_t>(got, 0)));
  }
  return offer;
}

}  // namespace

ExecutionPlan deterministic_execution_plan(cudnnHandle_t handle,
                                           const BackendDescriptor& op_graph) {
  std::string report;
  const std::pair<cudnnBackendHeurMode_t, const char*> modes[] = {
      {CUDNN_HEUR_MODE_A, "heuristics mode A"}, {CUDNN_HEUR_MODE_FALLBACK, "fallback heuristics"}};
  for (const auto& [mode, mode_name] : modes) {
    if (!report.empty()) report += "; ";
    Offer offer;
    try {
      offer = offered_configs(op_graph, mode, mode_name, report);
    } catch (const CudaError& e) {
      report += std::string(mode_name) + " failed: " + e.what();
      continue;
    }
    int nondeterministic = 0;
    for (const BackendDescriptor& config : offer.configs) {
      try {
        const EngineInfo engine = engine_of(config);
        if (!engine.deterministic) {
          ++nondeterministic;
          continue;
        }
        ExecutionPlan out;
        out.plan = BackendDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                     "execution plan (engine " + std::to_string(engine.index) +
                                         ") of " + op_graph.label());
        // Deprecated in later cuDNN 9 releases, wanted by earlier ones: set where accepted.
        out.plan.try_set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, handle);
        CUDNN_SET(out.plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config.get());
        out.plan.finalize();
        CUDNN_GET(out.plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                  std::span<std::int64_t>(&out.workspace_bytes, 1));
        return out;
      } catch (const CudaError& e) {
        report += "; " + config.label() + " refused: " + e.what();
      }
    }
    if (nondeterministic > 0)
      report += ", " + std::to_string(nondeterministic) + " non-deterministic skipped";
  }
  throw CudaError("no deterministic cuDNN engine runs " + op_graph.label() + " (" + report + ")");
}

}  // namespace conveyor::cudnn
#endif  // CONVEYOR_WITH_CUDNN
