#pragma once
// Activation memory as a count: a micro-batch is in flight on a (rank, chunk) from its F
// until its B (or, with the backward split, its W) has run. A rank's count is the sum over
// its chunks. The count depends only on each rank's order, not on timing.
#include <vector>

#include "actors/plan/schedule/schedule.hpp"

namespace conveyor::sched {

/// in_flight[r][k]: micro-batches in flight on rank r right after its k-th action.
std::vector<std::vector<int>> in_flight_counts(const Schedule& schedule);

/// Per rank, the largest count in in_flight_counts().
std::vector<int> peak_activations(const Schedule& schedule);

}  // namespace conveyor::sched
