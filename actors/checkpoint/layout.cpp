#include "actors/checkpoint/layout.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>

#include "actors/checkpoint/manifest.hpp"

namespace conveyor::checkpoint {

std::string step_dir_name(std::int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%06lld", static_cast<long long>(step));
  return buf;
}

std::optional<std::int64_t> parse_step_dir_name(std::string_view name) {
  constexpr std::string_view prefix = "step-";
  if (!name.starts_with(prefix) || name.size() == prefix.size()) return std::nullopt;
  const std::string_view digits = name.substr(prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  std::int64_t step = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return step;
}

std::string shard_file_name(int stage) { return "stage-" + std::to_string(stage) + ".safetensors"; }

std::string temp_file_name(const std::string& final_name) {
  static std::atomic<std::uint64_t> counter{0};
  return "." + final_name + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

std::optional<std::int64_t> temp_file_step(const std::string& path, const std::string& final_name) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return std::nullopt;
  const std::string_view name = std::string_view(path).substr(slash + 1);
  if (!name.starts_with("." + final_name + ".tmp-")) return std::nullopt;
  const std::string_view folder = std::string_view(path).substr(0, slash);
  return parse_step_dir_name(folder.substr(folder.rfind('/') + 1));  // npos + 1 == 0: the whole
}

std::vector<CheckpointFolder> list_checkpoints(Filesystem& fs, const std::string& checkpoint_dir) {
  std::vector<CheckpointFolder> out;
  if (!fs.is_dir(checkpoint_dir)) return out;
  for (const DirEntry& e : fs.list(checkpoint_dir)) {
    const auto step = parse_step_dir_name(e.name);
    if (!e.is_dir || !step) continue;
    CheckpointFolder f;
    f.step = *step;
    f.path = checkpoint_dir + "/" + e.name;
    f.complete = fs.exists(f.path + "/" + kManifestFile);
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(),
            [](const CheckpointFolder& a, const CheckpointFolder& b) { return a.step < b.step; });
  return out;
}

}  // namespace conveyor::checkpoint
