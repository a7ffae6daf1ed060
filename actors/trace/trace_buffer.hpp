#pragma once
// The recorder's two halves. A TraceBuffer belongs to one writer (a stage actor or the
// coordinator) and is touched by that writer only, so adding a record takes no lock: it
// is a store into a ring and one release store of the count. When half the ring is
// unflushed the writer hands that half to the TraceSink, whose mutex is taken once per
// batch (thousands of records), never per record.
//
// The last half-ring of records stays readable from another thread (the watchdog's dump)
// through recent(), which validates its copy against the count the way a seqlock does.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "actors/trace/step_range.hpp"
#include "actors/trace/trace_file.hpp"

namespace conveyor::trace {

/// One file, appended in batches. Thread-safe.
class TraceSink {
 public:
  /// Creates `file` (truncating it) and writes the header. Throws std::runtime_error.
  TraceSink(const std::filesystem::path& file, const FileHeader& header);
  ~TraceSink();
  TraceSink(const TraceSink&) = delete;
  TraceSink& operator=(const TraceSink&) = delete;

  void write(const Record* records, std::size_t n);
  std::uint64_t bytes_written() const;
  /// The first write that failed ("No space left on device" after N bytes), if any: the
  /// file then ends short of the records given (its readers report the truncated tail).
  std::optional<std::string> failure() const;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  mutable std::mutex mutex_;
  std::FILE* file_ = nullptr;
  std::uint64_t bytes_ = 0;
  std::optional<std::string> failure_;
  void note_failure(const char* what);  // REQUIRES: mutex_ held (or the constructor)
};

class TraceBuffer {
 public:
  /// REQUIRES: capacity is even and >= 2. Ids count on from `first_sequence` + 1
  /// (first_sequence_of: the process's own range).
  TraceBuffer(int writer, std::shared_ptr<TraceSink> sink, StepRange steps,
              std::size_t capacity = 8192, std::uint64_t first_sequence = 0);
  TraceBuffer(const TraceBuffer&) = delete;
  TraceBuffer& operator=(const TraceBuffer&) = delete;

  /// True when records of `step` are kept (trace.steps).
  bool wants(std::int64_t step) const { return steps_.contains(step); }
  /// A fresh id of this writer. Owner thread only.
  std::uint64_t next_id() { return make_id(writer_, ++sequence_); }
  /// Owner thread only.
  void add(const Record& r) {
    const std::uint64_t n = count_.load(std::memory_order_relaxed);
    ring_[n % ring_.size()] = r;
    count_.store(n + 1, std::memory_order_release);
    if (n + 1 - flushed_ >= ring_.size() / 2) flush();
  }
  /// Hands every unflushed record to the sink. Owner thread only (or once it stopped).
  void flush();
  /// Up to `n` of the latest records, oldest first. Any thread; records the owner may be
  /// overwriting during the copy are left out.
  std::vector<Record> recent(std::size_t n) const;
  std::uint64_t count() const { return count_.load(std::memory_order_acquire); }

 private:
  int writer_;
  std::shared_ptr<TraceSink> sink_;
  StepRange steps_;
  std::vector<Record> ring_;
  std::atomic<std::uint64_t> count_{0};
  std::uint64_t flushed_ = 0;
  std::uint64_t sequence_ = 0;
};

}  // namespace conveyor::trace
