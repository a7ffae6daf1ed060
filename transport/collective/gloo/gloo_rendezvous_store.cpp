#include "transport/collective/gloo/gloo_rendezvous_store.hpp"

#include <span>

#include "transport/collective/collective_error.hpp"
#include "transport/collective/store_polling.hpp"

namespace conveyor {

GlooRendezvousStore::GlooRendezvousStore(RendezvousClient& client, std::string prefix,
                                         std::chrono::milliseconds default_timeout)
    : client_(client), prefix_(std::move(prefix)), default_timeout_(default_timeout) {}

void GlooRendezvousStore::set(const std::string& key, const std::vector<char>& data) {
  client_.set(prefix_ + key,
              std::span(reinterpret_cast<const std::uint8_t*>(data.data()), data.size()));
}

std::vector<char> GlooRendezvousStore::get(const std::string& key) {
  const auto value = poll_keys(client_, {prefix_ + key},
                               std::chrono::steady_clock::now() + default_timeout_)[0];
  if (!value)
    throw CollectiveTimeout("collective: gloo store: '" + prefix_ + key + "' not set within " +
                            rendezvous::describe_duration(default_timeout_));
  return std::vector<char>(value->begin(), value->end());
}

void GlooRendezvousStore::wait(const std::vector<std::string>& keys) {
  wait(keys, default_timeout_);
}

void GlooRendezvousStore::wait(const std::vector<std::string>& keys,
                               const std::chrono::milliseconds& timeout) {
  std::vector<std::string> full;
  for (const auto& k : keys) full.push_back(prefix_ + k);
  const auto values = poll_keys(client_, full, std::chrono::steady_clock::now() + timeout);
  std::string missing;
  for (std::size_t i = 0; i < full.size(); ++i)
    if (!values[i]) missing += (missing.empty() ? "'" : ", '") + full[i] + "'";
  if (!missing.empty())
    throw CollectiveTimeout("collective: gloo store: " + missing + " not set within " +
                            rendezvous::describe_duration(timeout));
}

}  // namespace conveyor
