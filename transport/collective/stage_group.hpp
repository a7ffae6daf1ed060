#pragma once
// A stage group: the R data-parallel replicas of one pipeline stage, whose gradients are
// averaged before every optimizer step (issue 9). Each replica's copy of the stage is one
// rank of the group; its rank is its replica index.
//
// What must hold: every rank of a group uses the same name, size and generation, and the
// name is unique in the job (it prefixes the group's keys in the rendezvous store, so
// several groups share one store without seeing each other's keys). A group rebuilt after
// a failure takes the next generation: fresh keys, never the dead group's addresses or ids.
#include <cstdint>
#include <string>

namespace conveyor {

struct StageGroup {
  /// Unique in the job, e.g. "stage 1"; names the group in every error message.
  std::string name;
  /// This replica's rank in the group, 0 ≤ rank < size.
  int rank = 0;
  /// R, the number of replicas of the stage.
  int size = 1;
  /// Bumped each time the group is rebuilt.
  std::uint32_t generation = 0;

  /// "collective/<name>/<generation>/": the prefix of every store key of this group.
  std::string store_prefix() const;
  /// "collective: group 'stage 1' (rank 2 of 4)": the start of every error message.
  std::string describe() const;
  /// Throws std::invalid_argument for an empty name or a rank outside [0, size).
  void validate() const;
};

}  // namespace conveyor
