#pragma once
// Node 0's last step of a multi-process run: the coordinator's TrainResult holds the
// weights of stages in other processes as PendingPayload placeholders (their WeightsReply
// crossed CAF as names, shapes and dtypes only); their bytes arrive on the channel from
// the node that ran them (the stage actors sent them with their reply). With
// data-parallel replicas every replica's model is fetched so (node 0 compares them).
#include <chrono>
#include <vector>

#include "actors/stage/stage_links.hpp"
#include "actors/job/job_services.hpp"

namespace conveyor {

/// Replaces every placeholder in `weights` by the tensor received for it. Blocks (the
/// caller's thread, never an actor's) at most about `timeout`; throws std::runtime_error
/// naming the tensor and the node when one does not arrive.
void fetch_remote_weights(std::vector<NamedTensor>& weights, const StageLinks& links,
                          std::chrono::milliseconds timeout);

}  // namespace conveyor
