#include "actors/checkpoint/stalling_filesystem.hpp"

#include <thread>

#include "actors/checkpoint/layout.hpp"
#include "actors/checkpoint/manifest.hpp"

namespace conveyor::checkpoint {

StallingFilesystem::StallingFilesystem(Filesystem& inner, std::map<std::int64_t, std::chrono::milliseconds> stalls)
    : ForwardingFilesystem(inner), stalls_(std::move(stalls)) {}

std::chrono::milliseconds StallingFilesystem::stall_of(const std::string& path) const {
  const auto step = temp_file_step(path, kManifestFile);
  if (!step) return std::chrono::milliseconds(0);
  const auto it = stalls_.find(*step);
  return it == stalls_.end() ? std::chrono::milliseconds(0) : it->second;
}

std::unique_ptr<WritableFile> StallingFilesystem::create(const std::string& path) {
  std::this_thread::sleep_for(stall_of(path));
  return inner_.create(path);
}

}  // namespace conveyor::checkpoint
