#include "transport/rendezvous/error.hpp"

#include <fmt/format.h>

namespace conveyor::rendezvous {

std::string describe_duration(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{} s", d.count() / 1000);
  return fmt::format("{} ms", d.count());
}

std::string describe_ranks(std::span<const std::uint32_t> ranks) {
  if (ranks.empty()) return "no rank";
  std::string text;
  for (std::uint32_t r : ranks) {
    if (!text.empty()) text += ", ";
    text += fmt::format("rank {}", r);
  }
  return text;
}

std::string host_port(std::string_view host, unsigned port) {
  const bool v6 = host.find(':') != std::string_view::npos && !host.starts_with('[');
  return v6 ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

}  // namespace conveyor::rendezvous
