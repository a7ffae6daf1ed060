#include "transport/collective/store_polling.hpp"

#include <algorithm>
#include <thread>

namespace conveyor {
namespace {
constexpr auto kFirstPoll = std::chrono::milliseconds(1);
constexpr auto kSlowestPoll = std::chrono::milliseconds(20);
}  // namespace

std::vector<std::optional<rendezvous::Bytes>> poll_keys(
    RendezvousClient& store, const std::vector<std::string>& keys,
    std::chrono::steady_clock::time_point deadline) {
  std::vector<std::optional<rendezvous::Bytes>> values(keys.size());
  auto pause = std::chrono::duration_cast<std::chrono::steady_clock::duration>(kFirstPoll);
  for (;;) {
    bool all = true;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (!values[i]) values[i] = store.get(keys[i]);
      all = all && values[i].has_value();
    }
    const auto now = std::chrono::steady_clock::now();
    if (all || now >= deadline) return values;
    std::this_thread::sleep_for(std::min(pause, deadline - now));
    pause = std::min<std::chrono::steady_clock::duration>(pause * 2, kSlowestPoll);
  }
}

}  // namespace conveyor
