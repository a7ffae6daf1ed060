#include "actors/cluster/node_directory.hpp"

#include <fmt/format.h>

#include "actors/error_text.hpp"

namespace conveyor {
namespace {

using Self = caf::stateful_actor<NodeDirectoryState>;

// Records a node's stages; an unknown or repeated rank is a bug of the launcher.
caf::error add(Self* self, const NodeStages& stages) {
  auto& st = self->state;
  if (stages.ranks.size() != stages.actors.size())
    return failure(fmt::format("node {} announced {} ranks and {} actors", stages.node,
                               stages.ranks.size(), stages.actors.size()));
  for (std::size_t i = 0; i < stages.ranks.size(); ++i) {
    const int r = stages.ranks[i];
    if (r < 0 || r >= st.ranks || st.by_rank[r])
      return failure(fmt::format("node {} announced rank {}, which is {}", stages.node, r,
                                 r < 0 || r >= st.ranks ? "out of range" : "taken"));
    st.by_rank[r] = stages.actors[i];
    ++st.known;
  }
  if (st.known == st.ranks) {
    for (auto& p : st.waiting) p.deliver(st.by_rank);
    st.waiting.clear();
  }
  return caf::none;
}

}  // namespace

caf::behavior node_directory(Self* self, int ranks, NodeStages local) {
  self->state.ranks = ranks;
  self->state.by_rank.resize(ranks);
  if (auto err = add(self, local)) self->quit(err);
  return {
      [=](const NodeStages& stages) -> caf::result<bool> {
        if (auto err = add(self, stages)) return err;
        return true;
      },
      [=](stages_atom) -> caf::result<std::vector<caf::actor>> {
        auto& st = self->state;
        if (st.known == st.ranks) return st.by_rank;
        st.waiting.push_back(self->make_response_promise());
        return st.waiting.back();
      },
  };
}

}  // namespace conveyor
