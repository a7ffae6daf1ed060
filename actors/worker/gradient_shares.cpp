#include "actors/worker/gradient_shares.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace conveyor {

int share_of(int micro_batch, int micro_batches, int shares) {
  if (shares < 1 || micro_batches < 1 || micro_batches % shares != 0)
    throw std::invalid_argument(fmt::format(
        "gradient shares: {} shares do not divide {} micro-batches", shares, micro_batches));
  if (micro_batch < 0 || micro_batch >= micro_batches)
    throw std::invalid_argument(fmt::format("gradient shares: micro-batch {} of {}",
                                            micro_batch, micro_batches));
  return micro_batch / (micro_batches / shares);
}

std::vector<ChunkShareEnds> share_ends(const std::vector<sched::Action>& actions, int chunks,
                                       int micro_batches, int shares) {
  share_of(0, micro_batches, shares);  // checks the split
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::vector<ChunkShareEnds> out(static_cast<std::size_t>(chunks));
  for (auto& c : out) c.ends.assign(static_cast<std::size_t>(shares), kNone);
  std::vector<int> last_micro_batch(static_cast<std::size_t>(chunks), -1);
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const sched::Action& a = actions[i];
    if (a.kind != sched::ActionKind::B && a.kind != sched::ActionKind::W) continue;
    if (a.chunk < 0 || a.chunk >= chunks)
      throw std::invalid_argument(
          fmt::format("gradient shares: {} names chunk {} of {}", a.str(), a.chunk, chunks));
    const auto c = static_cast<std::size_t>(a.chunk);
    // Ascending order makes each share one contiguous run, in its own replica's order.
    if (a.micro_batch < last_micro_batch[c])
      throw std::invalid_argument(fmt::format(
          "gradient shares: {} (slot {}) comes after micro-batch {}'s weight gradient: the "
          "shares of chunk {} would not accumulate in micro-batch order",
          a.str(), i, last_micro_batch[c], a.chunk));
    last_micro_batch[c] = a.micro_batch;
    out[c].ends[static_cast<std::size_t>(share_of(a.micro_batch, micro_batches, shares))] = i;
  }
  for (std::size_t c = 0; c < out.size(); ++c)
    for (std::size_t s = 0; s < out[c].ends.size(); ++s)
      if (out[c].ends[s] == kNone)
        throw std::invalid_argument(fmt::format(
            "gradient shares: chunk {} has no weight-gradient action in share {}", c, s));
  return out;
}

}  // namespace conveyor
