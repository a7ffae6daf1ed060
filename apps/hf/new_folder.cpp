#include "apps/hf/new_folder.hpp"

#include <unistd.h>

#include "actors/checkpoint/filesystem.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

// A hidden name beside `out` for the folder in the making.
fs::path temp_folder_for(const fs::path& out) {
  std::string name = ".";  // appended piecewise: GCC 12 warns falsely on "." + str
  name += out.filename().string();
  name += ".tmp-" + std::to_string(::getpid());
  return out.parent_path() / name;
}

}  // namespace

fs::path new_folder_path(const std::string& arg) {
  fs::path out = fs::path(arg).lexically_normal();
  if (out.filename().empty()) out = out.parent_path();  // "dir/" -> "dir"
  if (out.empty() || out.filename() == "." || out.filename() == "..")
    throw InputError("--out " + arg + ": name a new folder");
  if (fs::exists(out) || fs::is_symlink(out)) throw InputError("--out " + arg + ": exists (name a new folder)");
  if (!out.parent_path().empty() && !fs::is_directory(out.parent_path()))
    throw InputError("--out " + arg + ": " + out.parent_path().string() + " is not a folder");
  return out;
}

void write_new_folder(const fs::path& out, const std::function<void(const fs::path&)>& fill) {
  auto& files = checkpoint::posix_filesystem();
  const fs::path tmp = temp_folder_for(out);
  std::error_code ec;
  fs::remove_all(tmp, ec);  // a leftover of this pid's earlier, failed write
  try {
    fs::create_directories(tmp);
    fill(tmp);
    files.sync_dir(tmp.string());
    fs::rename(tmp, out);
    files.sync_dir(out.parent_path().empty() ? "." : out.parent_path().string());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace conveyor
