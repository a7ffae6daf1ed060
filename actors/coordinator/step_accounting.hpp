#pragma once
// Pure functions the coordinator applies to the stage reports of one step. Each sums in
// an order fixed by the model (micro-batch, model stage, parameter), never by the
// split or by arrival, so results are bitwise identical for any number of stages.
#include <string>
#include <vector>

#include "actors/plan/placement.hpp"
#include "actors/plan/replica_placement.hpp"
#include "actors/plan/protocol.hpp"
#include "kernels/model/gpt_config.hpp"

namespace conveyor {

/// Mean of the per-micro-batch losses, summed in micro-batch order.
/// REQUIRES: exactly `micro_batches` losses across the reports, one per micro-batch.
double mean_loss(const std::vector<StageReport>& reports, int micro_batches);

/// sqrt of the sum of squared gradients, summed by model stage then parameter.
double global_grad_norm(const std::vector<StageReport>& reports);

/// The same over replica 0's reports alone (actors 0 … P−1): with data-parallel replicas
/// every replica's stage reports the squares of the same averaged gradients.
double global_grad_norm(const std::vector<StageReport>& reports, const ReplicaLayout& layout);

/// Ranks whose report holds a loss or a gradient square that is NaN or infinite, ascending:
/// where a non-finite step shows first (fault.on_nan names them).
std::vector<int> nonfinite_ranks(const std::vector<StageReport>& reports);

/// The parameters whose gradient square is NaN or infinite, by name, in model order (model
/// stage, then parameter; each once however many replicas report it): fault.on_nan's log
/// names the last of them, the layer where backward first met a non-finite value, which is
/// where an overflow (an FP8 one too) happened.
std::vector<std::string> nonfinite_params(const std::vector<StageReport>& reports,
                                          const GptConfig& model, const Placement& placement);

/// Busy time per rank (ms) and the idle share of all ranks over the step's compute span
/// (first action start to last action end).
struct MeasuredBubble {
  std::vector<double> busy_ms;
  double span_ms = 0.0;
  double bubble = 0.0;
};
MeasuredBubble measure_bubble(const std::vector<StageReport>& reports, int ranks);

/// The gradient averaging of a step with replicas: the mean over the reports of each
/// stage's reductions' own time (`busy_ms`) and of the time it still waited for them after
/// its compute (`exposed_ms`). The part hidden behind backward is 1 − exposed / busy.
struct ReductionCost {
  double busy_ms = 0.0;
  double exposed_ms = 0.0;
};
ReductionCost reduction_cost(const std::vector<StageReport>& reports);

}  // namespace conveyor
