#include "apps/train/run_dir.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <fmt/format.h>
#include <stdexcept>
#include <unistd.h>

#include "kernels/common/error.hpp"

namespace fs = std::filesystem;

namespace conveyor {
namespace {

std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

}  // namespace

fs::path checkpoint_folder(const std::string& configured, const fs::path& run_dir) {
  return configured.empty() ? run_dir / "checkpoints" : fs::path(configured);
}

fs::path unused_run_dir() {
  const fs::path base = fs::path("runs") / utc_timestamp();
  fs::path dir = base;
  for (int n = 2; fs::exists(dir); ++n) dir = base.string() + "-" + std::to_string(n);
  return dir;
}

void refuse_unwritable(const fs::path& dir, const std::string& what) {
  // access(2) says EROFS even to root: a read-only mount fails now, not at the first write.
  if (::access(dir.c_str(), W_OK) != 0)
    throw InputError(fmt::format("{} {}: cannot write there: {}", what, dir.string(), std::strerror(errno)));
}

void refuse_held_run(const fs::path& dir) {
  if (fs::exists(dir / "metrics.jsonl"))
    throw InputError(fmt::format("--out {}: already holds a run (metrics.jsonl); choose another "
                                 "folder",
                                 dir.string()));
}

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  const auto absolute = fs::absolute(path, ec);
  return ec ? path : absolute.lexically_normal().string();
}

namespace {

fs::path create_run_dir_or_throw(const std::optional<std::string>& out, bool continuing) {
  fs::path dir;
  if (out) {
    dir = *out;
    if (continuing && fs::is_directory(dir)) {
      // Appended to: a FIFO there would block the run at its first row.
      std::error_code ec;
      const auto metrics = fs::status(dir / "metrics.jsonl", ec);
      if (!ec && fs::exists(metrics) && !fs::is_regular_file(metrics))
        throw InputError(fmt::format("--out {}: metrics.jsonl exists and is not a regular file",
                                     dir.string()));
      refuse_unwritable(dir, "--out");
      return dir;
    }
    refuse_held_run(dir);
  } else {
    dir = unused_run_dir();
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw InputError(fmt::format("--out {}: cannot create the folder ({})", dir.string(),
                                 ec ? ec.message() : "not a directory"));
  refuse_unwritable(dir, "--out");
  return dir;
}

}  // namespace

fs::path create_run_dir(const std::optional<std::string>& out, bool continuing) {
  try {
    return create_run_dir_or_throw(out, continuing);
  } catch (const fs::filesystem_error& e) {
    // A link that loops on itself, a name too long: the user's --out, named as such.
    throw InputError(fmt::format("--out {}: {}", out ? *out : std::string(), e.code().message()));
  }
}

UnstartedRunDir::UnstartedRunDir(const std::optional<std::string>& out, bool continuing) {
  std::error_code ec;
  const bool existed = out && fs::exists(fs::symlink_status(*out, ec));
  dir_ = create_run_dir(out, continuing);
  made_here_ = !existed;
}

UnstartedRunDir::~UnstartedRunDir() {
  if (!made_here_) return;
  std::error_code ec;
  fs::remove_all(dir_, ec);  // best effort: the start's own error is the one to report
}

void write_file_atomically(const fs::path& path, const std::string& text) {
  // The rename below would put a regular file in place of a device or a pipe (or /dev/full
  // would be replaced, as root): only regular files, links to them, or new names are written.
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!ec && fs::exists(status) && !fs::is_regular_file(status))
    throw std::runtime_error(fmt::format("{}: exists and is not a regular file", path.string()));
  // Of this process: two runs writing into one folder must not share a temporary file.
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  auto fail = [&](const char* what) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw std::runtime_error(fmt::format("{}: {} failed: {}", path.string(), what, why));
  };
  if (fd < 0) fail("open");
  for (std::size_t done = 0; done < text.size();) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write");
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("fsync");
  if (::close(fd) != 0) {
    fd = -1;
    fail("close");
  }
  fd = -1;
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("rename");
}

}  // namespace conveyor
