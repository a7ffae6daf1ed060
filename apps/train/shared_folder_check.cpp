#include "apps/train/shared_folder_check.hpp"

#include <fmt/format.h>

#include <vector>

#include "actors/checkpoint/atomic_file.hpp"
#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/staged_shards.hpp"
#include "apps/train/run_dir.hpp"
#include "kernels/common/error.hpp"
#include "transport/rendezvous/error.hpp"

namespace conveyor {
namespace {

constexpr const char* kFolderKey = "checkpoint_folder";

std::string answer_key(int node) { return fmt::format("checkpoint_folder/{}", node); }

std::string not_seen(int node, const std::string& folder) {
  return fmt::format("checkpoint.writers: every_node: node {} does not see node 0's checkpoint folder {}; "
                     "checkpoint.dir must be one folder that every node sees (a shared filesystem, mounted "
                     "at the same path on every host), or use checkpoint.writers: node0",
                     node, folder);
}

}  // namespace

void check_shared_folder(RendezvousClient& store, int node, int nnodes, const std::string& folder,
                         checkpoint::Filesystem& fs, std::chrono::milliseconds timeout) {
  try {
    if (node != 0) {
      const std::string text = rendezvous::to_text(store.wait(kFolderKey, timeout));
      const auto cut = text.rfind('\n');
      const std::string where = text.substr(0, cut), probe = text.substr(cut + 1);
      const bool seen = cut != std::string::npos && fs.exists(where + "/" + probe);
      store.set(answer_key(node), seen ? "seen" : "not seen");
      if (!seen) throw InputError(not_seen(node, where));
      return;
    }
    const std::string where = absolute_path(folder);
    const std::string probe = ".probe-" + checkpoint::make_staging_token();
    fs.make_dirs(where);
    checkpoint::write_file_atomically(fs, where + "/" + probe, [](const checkpoint::ByteSink& sink) {
      sink("conveyor", 8);
    });
    fs.sync_dir(where);
    store.set(kFolderKey, where + "\n" + probe);
    std::vector<int> blind;
    for (int n = 1; n < nnodes; ++n)
      if (rendezvous::to_text(store.wait(answer_key(n), timeout)) != "seen") blind.push_back(n);
    fs.remove_file(where + "/" + probe);
    if (!blind.empty()) throw InputError(not_seen(blind.front(), where));
  } catch (const RendezvousError& e) {
    throw InputError(fmt::format("checkpoint.writers: every_node: checking that every node sees the checkpoint "
                                 "folder: {}",
                                 e.what()));
  } catch (const checkpoint::CheckpointError& e) {
    throw InputError(fmt::format("checkpoint.dir: {}", e.what()));
  }
}

}  // namespace conveyor
