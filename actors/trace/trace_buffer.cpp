#include "actors/trace/trace_buffer.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <stdexcept>

namespace conveyor::trace {

TraceSink::TraceSink(const std::filesystem::path& file, const FileHeader& header) : path_(file) {
  file_ = std::fopen(file.c_str(), "wb");
  if (!file_)
    throw std::runtime_error(fmt::format("{}: cannot create the trace file: {}", file.string(),
                                         std::strerror(errno)));
  const std::string h = encode_header(header);
  if (std::fwrite(h.data(), 1, h.size(), file_) != h.size() || std::fflush(file_) != 0) note_failure("write");
  bytes_ = h.size();
}

void TraceSink::note_failure(const char* what) {
  if (!failure_)
    failure_ = fmt::format("{} failed after {} bytes: {}", what, bytes_, std::strerror(errno));
}

std::optional<std::string> TraceSink::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

TraceSink::~TraceSink() {
  if (file_) std::fclose(file_);
}

void TraceSink::write(const Record* records, std::size_t n) {
  if (n == 0) return;
  std::lock_guard lock(mutex_);
  // Whole records or nothing of a batch is what a reader needs; a short write (disk full)
  // leaves a truncated tail that read_trace_file reports.
  if (failure_) return;  // the file already ends short: later records would not line up
  if (std::fwrite(records, sizeof(Record), n, file_) != n || std::fflush(file_) != 0) {
    note_failure("write");
    return;
  }
  bytes_ += n * sizeof(Record);
}

std::uint64_t TraceSink::bytes_written() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

TraceBuffer::TraceBuffer(int writer, std::shared_ptr<TraceSink> sink, StepRange steps,
                         std::size_t capacity, std::uint64_t first_sequence)
    : writer_(writer),
      sink_(std::move(sink)),
      steps_(steps),
      ring_(std::max<std::size_t>(2, capacity & ~std::size_t{1})),
      sequence_(first_sequence) {}

void TraceBuffer::flush() {
  const std::uint64_t n = count_.load(std::memory_order_relaxed);
  const std::size_t cap = ring_.size();
  while (flushed_ < n) {
    const std::size_t at = flushed_ % cap;
    const std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(n - flushed_, cap - at));
    if (sink_) sink_->write(ring_.data() + at, len);
    flushed_ += len;
  }
}

std::vector<Record> TraceBuffer::recent(std::size_t n) const {
  const std::size_t cap = ring_.size();
  const std::uint64_t before = count_.load(std::memory_order_acquire);
  const std::uint64_t keep = std::min<std::uint64_t>({n, before, cap / 2});
  std::vector<Record> out;
  out.reserve(keep);
  for (std::uint64_t i = before - keep; i < before; ++i) out.push_back(ring_[i % cap]);
  // Slot i is rewritten when the owner writes record i + cap: drop what it may have reached.
  const std::uint64_t after = count_.load(std::memory_order_acquire);
  const std::uint64_t first_valid = after >= cap ? after - cap + 1 : 0;
  const std::uint64_t first = before - keep;
  if (first_valid > first)
    out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(first_valid - first, out.size())));
  return out;
}

}  // namespace conveyor::trace
