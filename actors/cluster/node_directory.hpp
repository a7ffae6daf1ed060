#pragma once
// The one actor each process publishes through CAF's middleman. Other processes connect
// to it (remote_actor), which gives every pair of nodes one direct CAF connection:
// node k connects to the directories of nodes 0 .. k-1, so handles of stage actors in any
// process resolve to a direct route when the coordinator's PeerTable reaches them.
// Node 0's directory also gathers the stage actors of every node (NodeStages) and hands
// them, ordered by rank, to the coordinator's builder (stages_atom), so remote stage
// actors reach the coordinator as ordinary caf::actor handles.
#include <caf/all.hpp>
#include <vector>

#include "actors/messages.hpp"

namespace conveyor {

using stages_atom = caf::atom_constant<caf::atom("stages")>;

struct NodeDirectoryState {
  int ranks = 0;                      // pipeline ranks of the whole job
  std::vector<caf::actor> by_rank;    // filled as nodes announce their stages
  int known = 0;                      // entries of by_rank filled
  std::vector<caf::response_promise> waiting;  // stages_atom requests before all known
  static inline const char* name = "node-directory";
};

/// `local` are this node's stages (NodeStages.node is ignored here).
caf::behavior node_directory(caf::stateful_actor<NodeDirectoryState>* self, int ranks,
                             NodeStages local);

}  // namespace conveyor
