#pragma once
// Helpers for the checkpoint tests: a scratch folder, small snapshots with recognisable
// bytes, and a Filesystem that injects faults into the real one.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/snapshot.hpp"

namespace conveyor::testing {

/// A fresh folder under the system's temp folder, removed at the end of the test.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name) {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("conveyor_ckpt_" + name + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
                .string();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rest) const { return path_ + "/" + rest; }

 private:
  std::string path_;
};

/// An f32 tensor whose every element depends on (salt, index), so two tensors made with
/// different salts differ everywhere.
inline Tensor pattern_tensor(Shape shape, std::uint32_t salt) {
  Tensor t = Tensor::zeros(std::move(shape));
  auto s = t.f32_span();
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<float>((i * 2654435761u) ^ salt) * 1e-3f - 7.5f;
  return t;
}

/// A snapshot of `stages` shards, each with two weights and their AdamW moments; the
/// bytes depend on `step`, so checkpoints of different steps differ.
inline checkpoint::Snapshot small_snapshot(std::int64_t step, int stages = 2, std::int64_t width = 64) {
  checkpoint::Snapshot s;
  s.manifest.step = step;
  s.manifest.optimizer_steps = step;
  s.manifest.seed = 1234;
  s.manifest.schedule = "1f1b";
  s.manifest.stages = stages;
  s.manifest.partition_halves.assign(static_cast<std::size_t>(stages), 2);
  s.manifest.config = "model:\n  layers: " + std::to_string(stages) + "\n";
  for (int k = 0; k < stages; ++k) {
    checkpoint::StageShard shard;
    shard.stage = k;
    const std::string w = "blocks." + std::to_string(k) + ".mlp.fc1.weight";
    const std::string b = "blocks." + std::to_string(k) + ".mlp.fc1.bias";
    const auto salt = static_cast<std::uint32_t>(step * 100 + k);
    shard.tensors.push_back({w, pattern_tensor({width, 16}, salt)});
    shard.tensors.push_back({"opt.m." + w, pattern_tensor({width, 16}, salt + 1)});
    shard.tensors.push_back({"opt.v." + w, pattern_tensor({width, 16}, salt + 2)});
    shard.tensors.push_back({b, pattern_tensor({width}, salt + 3)});
    s.shards.push_back(std::move(shard));
  }
  return s;
}

/// The real filesystem with faults on demand. A fault applies to paths containing the
/// given substring. After a simulated crash every call fails, as if the process had died:
/// the code under test cannot even clean up.
class FaultFilesystem final : public checkpoint::Filesystem {
 public:
  std::string fail_write_to;     // write() throws (a full disk)
  std::string short_write_to;    // write() takes half once, then accepts nothing
  std::string lying_write_to;    // write() reports success but keeps only half
  std::string fail_sync_to;      // file fsync throws
  std::string fail_dir_sync_to;  // folder fsync throws
  std::string fail_rename_to;    // rename() throws (matched against the target)
  std::string fail_open_of;      // open() throws EACCES (a folder that cannot be read)
  long crash_after_ops = -1;     // mutating calls allowed before the "crash"; -1: never
  std::chrono::milliseconds write_delay{0};  // every write() sleeps this long (a slow disk)
  bool skip_fsync = false;  // fsyncs are counted and can fail, but do not reach the disk:
                            // for tests that simulate crashes rather than suffer them

  long ops() const { return ops_; }
  bool crashed() const { return crashed_; }

  std::unique_ptr<checkpoint::WritableFile> create(const std::string& path) override {
    step("create", path);
    return std::make_unique<File>(*this, real().create(path), path);
  }
  std::unique_ptr<checkpoint::ReadableFile> open(const std::string& path) override {
    alive(path);
    if (hit(fail_open_of, path)) fail(path, "open failed: injected EACCES");
    return real().open(path);
  }
  void rename(const std::string& from, const std::string& to) override {
    step("rename", to);
    if (hit(fail_rename_to, to)) fail(to, "rename failed: injected EIO");
    real().rename(from, to);
  }
  void sync_dir(const std::string& dir) override {
    step("sync_dir", dir);
    if (hit(fail_dir_sync_to, dir)) fail(dir, "fsync of folder failed: injected EIO");
    if (!skip_fsync) real().sync_dir(dir);
  }
  void remove_file(const std::string& path) override {
    step("remove_file", path);
    real().remove_file(path);
  }
  void remove_all(const std::string& path) override {
    step("remove_all", path);
    real().remove_all(path);
  }
  void make_dirs(const std::string& dir) override {
    step("make_dirs", dir);
    real().make_dirs(dir);
  }
  bool exists(const std::string& path) override {
    alive(path);
    return real().exists(path);
  }
  bool is_dir(const std::string& path) override {
    alive(path);
    return real().is_dir(path);
  }
  std::vector<checkpoint::DirEntry> list(const std::string& dir) override {
    alive(dir);
    return real().list(dir);
  }

 private:
  class File final : public checkpoint::WritableFile {
   public:
    File(FaultFilesystem& fs, std::unique_ptr<checkpoint::WritableFile> real, std::string path)
        : fs_(fs), real_(std::move(real)), path_(std::move(path)) {}
    std::size_t write(const void* data, std::size_t bytes) override {
      fs_.step("write", path_);
      if (fs_.write_delay.count() > 0) std::this_thread::sleep_for(fs_.write_delay);
      if (hit(fs_.fail_write_to, path_)) fs_.fail(path_, "write failed: injected ENOSPC");
      if (hit(fs_.short_write_to, path_)) {
        if (short_done_) return 0;
        short_done_ = true;
        return real_->write(data, (bytes + 1) / 2);
      }
      if (hit(fs_.lying_write_to, path_)) {
        real_->write(data, bytes / 2);
        return bytes;
      }
      return real_->write(data, bytes);
    }
    void sync() override {
      fs_.step("sync", path_);
      if (hit(fs_.fail_sync_to, path_)) fs_.fail(path_, "fsync failed: injected EIO");
      if (!fs_.skip_fsync) real_->sync();
    }
    void close() override {
      fs_.step("close", path_);
      real_->close();
    }

   private:
    FaultFilesystem& fs_;
    std::unique_ptr<checkpoint::WritableFile> real_;
    std::string path_;
    bool short_done_ = false;
  };

  static checkpoint::Filesystem& real() { return checkpoint::posix_filesystem(); }
  static bool hit(const std::string& pattern, const std::string& path) {
    return !pattern.empty() && path.find(pattern) != std::string::npos;
  }
  [[noreturn]] void fail(const std::string& path, const std::string& reason) {
    throw checkpoint::CheckpointError(path, reason);
  }
  void alive(const std::string& path) {
    std::lock_guard lock(mutex_);
    if (crashed_) fail(path, "simulated crash: the process is gone");
  }
  void step(const char* /*call*/, const std::string& path) {
    std::lock_guard lock(mutex_);
    if (crashed_) fail(path, "simulated crash: the process is gone");
    if (crash_after_ops >= 0 && ops_ >= crash_after_ops) {
      crashed_ = true;
      fail(path, "simulated crash");
    }
    ++ops_;
  }

  std::mutex mutex_;
  long ops_ = 0;
  bool crashed_ = false;
};

}  // namespace conveyor::testing
