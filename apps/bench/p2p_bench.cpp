#include "apps/bench/p2p_bench.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "apps/bench/p2p_bench_parts.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

constexpr std::size_t kMaxBytes = std::size_t{1} << 30;

[[noreturn]] void bad_size(const std::string& text) {
  throw InputError("--sizes: '" + text +
                   "' is not a size: use positive multiples of 4 bytes up to 1GiB, such as "
                   "4096, 8KiB, 16MiB (comma-separated)");
}

nlohmann::json to_json(const p2p::Row& row) {
  const auto gbs = [&](double us) { return us > 0 ? static_cast<double>(row.bytes) / (us * 1e3) : 0.0; };
  nlohmann::json j = {{"transport", row.transport},
                      {"bytes", row.bytes},
                      {"iterations", row.iterations},
                      {"channel_us", row.channel.us},
                      {"channel_gbs", gbs(row.channel.us)},
                      {"raw_us", row.raw.us},
                      {"raw_gbs", gbs(row.raw.us)},
                      {"ratio", row.channel.us > 0 ? row.raw.us / row.channel.us : 0.0}};
  if (row.channel.sync_us > 0) {
    j["channel_sync_us"] = row.channel.sync_us;
    j["raw_sync_us"] = row.raw.sync_us;
    j["sync_ratio"] = row.raw.sync_us > 0 ? row.channel.sync_us / row.raw.sync_us : 0.0;
  }
  return j;
}

std::string size_text(std::size_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{}MiB", bytes >> 20);
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return fmt::format("{}KiB", bytes >> 10);
  return fmt::format("{}B", bytes);
}

}  // namespace

const std::vector<std::string>& p2p_transports() {
  static const std::vector<std::string> kinds = {"all", "nccl", "cuda-peer", "ucx"};
  return kinds;
}

std::size_t parse_p2p_size(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 10) bad_size(text);
  const std::uint64_t number = std::stoull(text.substr(0, digits));
  const std::string unit = text.substr(digits);
  std::uint64_t scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "KiB") scale = std::uint64_t{1} << 10;
  else if (unit == "MiB") scale = std::uint64_t{1} << 20;
  else if (unit == "GiB") scale = std::uint64_t{1} << 30;
  else bad_size(text);
  const std::uint64_t bytes = number * scale;
  if (bytes == 0 || bytes % 4 != 0 || bytes > kMaxBytes) bad_size(text);
  return static_cast<std::size_t>(bytes);
}

nlohmann::json run_p2p_bench(const P2pOptions& options) {
  const auto& kinds = p2p_transports();
  if (std::find(kinds.begin(), kinds.end(), options.transport) == kinds.end())
    throw InputError("--transport: '" + options.transport +
                     "' is not a transport (all, nccl, cuda-peer, ucx)");
  if (options.sizes.empty()) throw InputError("--sizes: give at least one size");
  if (options.iterations < 0 || options.iterations > kMaxP2pIterations)
    throw InputError("--iterations: " + std::to_string(options.iterations) + " not in range 0 to " +
                     std::to_string(kMaxP2pIterations) + " (0: by size)");
  if (options.repeats < 1 || options.repeats > kMaxP2pRepeats)
    throw InputError("--repeats: " + std::to_string(options.repeats) + " not in range 1 to " +
                     std::to_string(kMaxP2pRepeats));
  p2p::Plan plan;
  plan.iterations = options.iterations;
  plan.repeats = options.repeats;
  for (const auto& s : options.sizes) plan.sizes.push_back(parse_p2p_size(s));

  nlohmann::json results = nlohmann::json::array();
  nlohmann::json skipped = nlohmann::json::array();
  const int gpus = p2p::cuda_device_count();
  const auto wanted = [&](const std::string& kind) {
    return options.transport == "all" || options.transport == kind;
  };
  for (const std::string kind : {"nccl", "cuda-peer"}) {
    if (!wanted(kind)) continue;
    if (gpus < 2) {
      const std::string reason =
          fmt::format("needs 2 GPUs, this machine has {}{}", gpus,
#if CONVEYOR_WITH_CUDA
                      ""
#else
                      " (this build has no CUDA)"
#endif
          );
      if (options.transport == kind) throw InputError("bench p2p --transport " + kind + ": " + reason);
      fmt::print(stderr, "bench p2p: skipped {}: {}\n", kind, reason);
      skipped.push_back({{"transport", kind}, {"reason", reason}});
      continue;
    }
    fmt::print(stderr, "bench p2p: {} ...\n", kind);
    for (const auto& row : kind == "nccl" ? p2p::bench_nccl(plan) : p2p::bench_cuda_peer(plan))
      results.push_back(to_json(row));
  }
  nlohmann::json out = {{"bench", "p2p"}};
  if (wanted("ucx")) {
    fmt::print(stderr, "bench p2p: ucx ...\n");
    for (const auto& row : p2p::bench_ucx(plan)) results.push_back(to_json(row));
    out["ucx_transports"] = p2p::ucx_transports();
  }
  out["results"] = std::move(results);
  out["skipped"] = std::move(skipped);
  return out;
}

std::string format_p2p_table(const nlohmann::json& result) {
  std::string text = fmt::format("{:<10} {:>7} {:>11} {:>10} {:>11} {:>10} {:>7} {:>11} {:>11} {:>6}\n",
                                 "transport", "size", "channel us", "GB/s", "raw us", "GB/s",
                                 "ratio", "sync us", "raw sync", "x raw");
  for (const auto& r : result["results"]) {
    text += fmt::format("{:<10} {:>7} {:>11.2f} {:>10.2f} {:>11.2f} {:>10.2f} {:>7.3f}",
                        r["transport"].get<std::string>(), size_text(r["bytes"].get<std::size_t>()),
                        r["channel_us"].get<double>(), r["channel_gbs"].get<double>(),
                        r["raw_us"].get<double>(), r["raw_gbs"].get<double>(),
                        r["ratio"].get<double>());
    if (r.contains("channel_sync_us"))
      text += fmt::format(" {:>11.2f} {:>11.2f} {:>6.2f}", r["channel_sync_us"].get<double>(),
                          r["raw_sync_us"].get<double>(), r["sync_ratio"].get<double>());
    text += "\n";
  }
  for (const auto& s : result["skipped"])
    text += fmt::format("{:<10} skipped: {}\n", s["transport"].get<std::string>(),
                        s["reason"].get<std::string>());
  if (result.contains("ucx_transports"))
    text += fmt::format("ucx transports: {}\n", result["ucx_transports"].get<std::string>());
  text += "ratio = channel bandwidth / raw bandwidth (same run); x raw = channel sync latency / raw\n";
  return text;
}

namespace p2p {

int gpu_iterations(const Plan& plan, std::size_t bytes) {
  if (plan.iterations > 0) return plan.iterations;
  return bytes <= (std::size_t{1} << 20) ? 200 : 30;  // as the reference NCCL benchmark of the GPU machine times them
}

int ucx_iterations(const Plan& plan, std::size_t bytes) {
  if (plan.iterations > 0) return plan.iterations;
  // About 256 MiB each way per measurement, between 10 and 200 round trips.
  const std::size_t n = (std::size_t{256} << 20) / bytes;
  return static_cast<int>(std::clamp<std::size_t>(n, 10, 200));
}

}  // namespace p2p
}  // namespace conveyor
