#include "actors/trace/trace_session.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>
#include <unistd.h>

namespace conveyor::trace {

std::string local_host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "unknown";
  return name;
}

void keep_earlier_trace(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return;
  // Under a name the trace commands do not read (they merge every *.ctrace of the folder
  // as one run's processes), so that nothing of it is lost.
  std::filesystem::path kept;
  for (int n = 1; kept.empty() || std::filesystem::exists(kept, ec); ++n)
    kept = file.string() + ".earlier-" + std::to_string(n);
  std::filesystem::rename(file, kept, ec);
  if (ec)
    throw std::runtime_error(fmt::format("{}: cannot keep the earlier trace as {}: {}", file.string(),
                                         kept.string(), ec.message()));
  fmt::print(stderr, "trace: the earlier trace of this run folder is kept as {} (trace commands read the new one)\n",
             kept.string());
}

TraceSession::TraceSession(const TraceOptions& o, int stages) {
  std::error_code ec;
  std::filesystem::create_directories(o.dir, ec);
  if (ec)
    throw std::runtime_error(fmt::format("{}: cannot create the trace folder: {}", o.dir.string(),
                                         ec.message()));
  FileHeader header;
  header.clock_offset_ns = o.clock_offset_ns;
  header.process_index = o.process_index;
  header.host = o.host.empty() ? local_host_name() : o.host;
  const auto file = o.dir / trace_file_name(o.process_index);
  keep_earlier_trace(file);
  sink_ = std::make_shared<TraceSink>(file, header);
  const std::uint64_t first = first_sequence_of(o.process_index);
  buffers_.push_back(std::make_unique<TraceBuffer>(0, sink_, o.steps, o.buffer_records, first));
  for (int r = 0; r < stages; ++r)
    buffers_.push_back(
        std::make_unique<TraceBuffer>(writer_of_stage(r), sink_, o.steps, o.buffer_records, first));
}

TraceSession::~TraceSession() { flush_all(); }

void TraceSession::flush_all() {
  for (auto& b : buffers_) b->flush();
}

std::vector<Record> TraceSession::recent(std::size_t per_writer) const {
  std::vector<Record> all;
  for (const auto& b : buffers_) {
    auto part = b->recent(per_writer);
    all.insert(all.end(), part.begin(), part.end());
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Record& a, const Record& b) { return a.start_ns < b.start_ns; });
  return all;
}

}  // namespace conveyor::trace
