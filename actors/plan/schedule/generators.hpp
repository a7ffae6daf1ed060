#pragma once
// The schedule generators, one file each. They trust their spec (make_schedule checks it
// first and validates what they return); call make_schedule() rather than these.
// Each returns a compute-only schedule in which every rank runs its W (or B) of a chunk in
// micro-batch order.
#include "actors/plan/schedule/schedule.hpp"

namespace conveyor::sched {

/// All forwards, then all backwards (B), in micro-batch order.
Schedule make_gpipe(const ScheduleSpec& spec);
/// Warm-up of min(p−1−r, m) forwards, then one F one B, then the remaining B.
Schedule make_one_f_one_b(const ScheduleSpec& spec);
/// Megatron-style interleaved 1F1B with looped placement (stage = chunk·p + rank).
/// REQUIRES: virtual_stages >= 2, micro_batches % stages == 0.
Schedule make_interleaved(const ScheduleSpec& spec);
/// ZB-H1: 1F1B's F/I order with rank r's W lagging its I by r backward actions.
Schedule make_zero_bubble_h1(const ScheduleSpec& spec);
/// ZB-V: two chunks per rank in a V (chunk 0 = stage r, chunk 1 = stage 2p−1−r).
Schedule make_zero_bubble_v(const ScheduleSpec& spec);

}  // namespace conveyor::sched
