#include "actors/checkpoint/corrupting_filesystem.hpp"

#include <vector>

#include "actors/checkpoint/layout.hpp"

namespace conveyor::checkpoint {
namespace {

// Flips the first byte it is given (the low byte of the header length), then passes
// everything through: the size stays right, the content does not.
class FlippingFile final : public WritableFile {
 public:
  explicit FlippingFile(std::unique_ptr<WritableFile> inner) : inner_(std::move(inner)) {}

  std::size_t write(const void* data, std::size_t bytes) override {
    if (flipped_ || bytes == 0) return inner_->write(data, bytes);
    std::vector<unsigned char> copy(static_cast<const unsigned char*>(data),
                                    static_cast<const unsigned char*>(data) + bytes);
    copy[0] ^= 0x01;
    const std::size_t n = inner_->write(copy.data(), copy.size());
    if (n > 0) flipped_ = true;
    return n;
  }
  void sync() override { inner_->sync(); }
  void close() override { inner_->close(); }

 private:
  std::unique_ptr<WritableFile> inner_;
  bool flipped_ = false;
};

}  // namespace

CorruptingFilesystem::CorruptingFilesystem(Filesystem& inner, std::set<std::int64_t> steps)
    : ForwardingFilesystem(inner), steps_(std::move(steps)) {}

bool CorruptingFilesystem::corrupts(const std::string& path) const {
  const auto step = temp_file_step(path, shard_file_name(0));
  return step && steps_.count(*step);
}

std::unique_ptr<WritableFile> CorruptingFilesystem::create(const std::string& path) {
  auto file = inner_.create(path);
  if (!corrupts(path)) return file;
  return std::make_unique<FlippingFile>(std::move(file));
}

}  // namespace conveyor::checkpoint
