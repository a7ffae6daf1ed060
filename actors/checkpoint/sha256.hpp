#pragma once
// SHA-256 (OpenSSL's EVP implementation), incremental, so a shard's digest is computed
// from the bytes as they are written, without reading the file back.
#include <cstddef>
#include <memory>
#include <string>

#include "actors/checkpoint/filesystem.hpp"

namespace conveyor::checkpoint {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, std::size_t bytes);
  /// The digest as 64 lowercase hex digits. REQUIRES: called once, last.
  std::string hex_digest();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

/// The digest of a whole file, read in 4 MiB pieces. Also returns its size in bytes.
struct FileDigest {
  std::uint64_t bytes = 0;
  std::string sha256;
};
FileDigest sha256_of_file(ReadableFile& file);
FileDigest sha256_of_file(Filesystem& fs, const std::string& path);

}  // namespace conveyor::checkpoint
