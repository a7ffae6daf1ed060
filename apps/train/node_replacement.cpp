#include "apps/train/node_replacement.hpp"

namespace conveyor {

bool takes_replacements(const RunConfig& config) {
  const auto& f = config.fault;
  const bool cpu = config.devices.kind == DeviceKind::cpu;
  const bool copies = f.buddy_copies == BuddyCopies::on || (f.buddy_copies == BuddyCopies::automatic && cpu);
  // Without copies every stage goes back to the newest checkpoint (CPU stages so far);
  // with optim.shard_state each replica cuts its part of the merged AdamW state.
  const bool from_checkpoint = cpu && config.checkpoint.every > 0;
  return (copies || from_checkpoint) && f.policy == FaultPolicy::restart && f.snapshot_every > 0 &&
         f.rejoin_timeout_s > 0;
}

}  // namespace conveyor
