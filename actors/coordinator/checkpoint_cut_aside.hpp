#pragma once
// Issue 44's shrink without buddy copies starts from the newest verified checkpoint of the
// run: its shards are read from node 0's disk and cut for the new layout
// (reshard_checkpoint). That read is the model's whole state (AdamW moments included: over
// a gigabyte for ~100 M parameters); on the coordinator's thread it held back every
// message to the coordinator for as long — a second node's loss, a node joining, the
// progress and the watchdog's probes. Here it runs on an actor of its own, detached (its
// own thread: it blocks on the disk, and must not hold one of the scheduler's workers,
// which the stages run on), which answers the asker once and ends.
// What must hold: the asker's thread never waits for the disk; `done` (with the cut) or
// `failed` (why, naming the checkpoint) runs exactly once, as a reply on the asker's
// thread, unless the asker ended first (then neither; the worker still ends once its read
// does). The worker owns what it reads from, but `fs`, which must outlive it
// (checkpoint::posix_filesystem() is static). The cut is reshard_checkpoint's, bit for bit.
// The runtime's count of detached threads (actors/runtime/detached_threads.hpp) counts
// this one's end without its spawn: harmless where a shrink runs, across processes, whose
// stages are never detached (the count stays at 0 spawned); the process's actor system
// still waits for the worker as for any actor it runs.
#include <caf/all.hpp>

#include <functional>
#include <memory>
#include <string>

#include "actors/checkpoint/filesystem.hpp"
#include "actors/fault/reshard_checkpoint.hpp"
#include "actors/messages/error_text.hpp"
#include "actors/plan/job_plan.hpp"

namespace conveyor {

using cut_checkpoint_atom = caf::atom_constant<caf::atom("cutckpt")>;

/// The worker: answers one {cut_checkpoint_atom, step_dir, plan} with the checkpoint in
/// step_dir cut for plan (reshard_checkpoint over `fs`), or its failure; then it ends.
caf::behavior checkpoint_cutter(caf::event_based_actor* self, checkpoint::Filesystem* fs);

/// Has a worker of its own (checkpoint_cutter, detached) read and cut `step_dir` for `to`;
/// `done(CheckpointCut&)` or `failed(const std::string&)` then runs on `self`'s thread.
template <class Self, class Done, class Failed>
void cut_checkpoint_aside(Self* self, checkpoint::Filesystem& fs, const std::string& step_dir,
                          std::shared_ptr<const JobPlan> to, Done done, Failed failed) {
  auto worker = self->template spawn<caf::detached>(checkpoint_cutter, &fs);
  self->request(worker, caf::infinite, cut_checkpoint_atom::value, step_dir, std::move(to))
      .then([done](std::shared_ptr<CheckpointCut>& cut) mutable { done(*cut); },
            [self, failed](caf::error& e) mutable { failed(error_text(self->system(), e)); });
}

}  // namespace conveyor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<conveyor::CheckpointCut>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<const conveyor::JobPlan>)
