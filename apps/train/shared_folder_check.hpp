#pragma once
// checkpoint.writers every_node over several processes: before the run starts, every node
// proves that it sees node 0's checkpoint folder. Node 0 leaves a probe file there (a
// random name) and publishes the folder's absolute path and the name in the job's store;
// each other node looks for the file and answers. A node that does not see it fails the
// job at start, exit 2 on every node, naming the folder and checkpoint.dir, rather than
// at the first checkpoint hours later (which would fail, and the run go on without).
#include <chrono>
#include <string>

#include "actors/checkpoint/filesystem.hpp"
#include "transport/rendezvous/client.hpp"

namespace conveyor {

/// Node 0: `folder` is its checkpoint folder (created here if missing); the others pass
/// anything (node 0's is used). Every node of the job must call it, with the same
/// `nnodes`, at the same point of its start (a replacement joining a running job does not).
/// Throws InputError when some node does not see the folder, or the store does not answer
/// within `timeout`.
void check_shared_folder(RendezvousClient& store, int node, int nnodes, const std::string& folder,
                         checkpoint::Filesystem& fs, std::chrono::milliseconds timeout);

}  // namespace conveyor
