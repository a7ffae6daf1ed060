#include "apps/train/node_replacement.hpp"

#include "actors/plan/node_replacement.hpp"

namespace conveyor {

bool takes_replacements(const RunConfig& config) {
  const auto& f = config.fault;
  const bool cpu = config.devices.kind == DeviceKind::cpu;
  return no_replacement_reason(ReplacementFacts{
                                   .nodes = 2,  // asked of a job over several processes
                                   .policy = f.policy,
                                   .snapshots = f.snapshot_every > 0 &&
                                                (f.policy == FaultPolicy::restart ||
                                                 f.on_nan == NanPolicy::rollback),
                                   .copies = buddy_copies_on(f.buddy_copies, cpu),
                                   .all_cpu = cpu,
                                   .checkpoint_every = config.checkpoint.every,
                                   .rejoin_timeout_s = f.rejoin_timeout_s})
      .empty();
}

}  // namespace conveyor
