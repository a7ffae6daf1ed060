#include "actors/coordinator/checkpoint_cut_aside.hpp"

#include <exception>

namespace conveyor {

caf::behavior checkpoint_cutter(caf::event_based_actor* self, checkpoint::Filesystem* fs) {
  return {
      [self, fs](cut_checkpoint_atom, const std::string& step_dir,
                 const std::shared_ptr<const JobPlan>& to) -> caf::result<std::shared_ptr<CheckpointCut>> {
        self->quit();  // one read per worker: it ends once this reply is sent
        try {
          return std::make_shared<CheckpointCut>(reshard_checkpoint(*fs, step_dir, *to));
        } catch (const std::exception& e) {
          return failure(e.what());
        }
      },
  };
}

}  // namespace conveyor
