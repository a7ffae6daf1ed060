#pragma once
// The first step of building a stage group on every rank: each rank publishes its bucket
// layout and reduction under "<group prefix>layout/<rank>" and reads every other rank's.
// This is where a missing rank is found (the group cannot connect without it) and where a
// rank that buckets its gradients differently is refused, before any collective could run
// with mismatched sizes (gradient_bucket.hpp says why that must not happen).
// Thread-safety: as the store client's.
#include <chrono>

#include "transport/collective/gradient_bucket.hpp"
#include "transport/collective/stage_group.hpp"
#include "transport/rendezvous/client.hpp"

namespace conveyor {

/// The layout and reduction as the text stored for them: "average | f32x100 f32x7".
std::string layout_record(const BucketLayout& layout, Reduction reduction);

/// REQUIRES: every rank of `group` calls this once per generation.
/// Returns once every rank published the same record. Throws CollectiveTimeout naming the
/// ranks that published nothing within `timeout` ("rank 2 did not join"), CollectiveError
/// naming the first rank whose record differs from this rank's, and the first bucket.
void agree_on_layout(RendezvousClient& store, const StageGroup& group,
                     const BucketLayout& layout, Reduction reduction,
                     std::chrono::milliseconds timeout);

}  // namespace conveyor
