#include "actors/trace/trace_file.hpp"

#include <bit>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

#include "kernels/common/error.hpp"

namespace conveyor::trace {
namespace {

static_assert(std::endian::native == std::endian::little,
              "trace files are little-endian and written as raw records");

constexpr std::size_t kFixedHeader = 32;
constexpr std::size_t kMaxHost = 255;

template <class T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

template <class T>
T get(const std::string& in, std::size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof(T));
  return v;
}

}  // namespace

std::string encode_header(const FileHeader& h) {
  std::string out(kTraceMagic, sizeof kTraceMagic);
  const std::string host = h.host.substr(0, kMaxHost);
  put<std::uint32_t>(out, h.version);
  put<std::uint32_t>(out, sizeof(Record));
  put<std::int64_t>(out, h.clock_offset_ns);
  put<std::uint32_t>(out, h.process_index);
  put<std::uint32_t>(out, static_cast<std::uint32_t>(host.size()));
  out += host;
  out.append((8 - out.size() % 8) % 8, '\0');
  return out;
}

TraceFile decode_trace_file(const std::string& bytes, const std::string& name) {
  auto bad = [&](const std::string& why) {
    return InputError(fmt::format("trace file {}: {}", name, why));
  };
  if (bytes.size() < kFixedHeader) throw bad(fmt::format("too short for a header ({} bytes)", bytes.size()));
  if (std::memcmp(bytes.data(), kTraceMagic, sizeof kTraceMagic) != 0)
    throw bad("not a conveyor trace (wrong magic)");
  TraceFile f;
  f.header.version = get<std::uint32_t>(bytes, 8);
  if (f.header.version != kTraceVersion)
    throw bad(fmt::format("version {} is not supported (this conveyor reads version {})",
                          f.header.version, kTraceVersion));
  const auto record_size = get<std::uint32_t>(bytes, 12);
  if (record_size != sizeof(Record))
    throw bad(fmt::format("record size {} is not {}", record_size, sizeof(Record)));
  f.header.clock_offset_ns = get<std::int64_t>(bytes, 16);
  f.header.process_index = get<std::uint32_t>(bytes, 24);
  const auto host_len = get<std::uint32_t>(bytes, 28);
  if (host_len > kMaxHost || kFixedHeader + host_len > bytes.size())
    throw bad(fmt::format("host name length {} runs past the header", host_len));
  f.header.host = bytes.substr(kFixedHeader, host_len);
  std::size_t at = kFixedHeader + host_len;
  at += (8 - at % 8) % 8;
  if (at > bytes.size()) throw bad("truncated header");
  const std::size_t area = bytes.size() - at;
  if (area % sizeof(Record) != 0)
    throw bad(fmt::format("truncated: {} bytes after the last whole record", area % sizeof(Record)));
  f.records.resize(area / sizeof(Record));
  if (!f.records.empty()) std::memcpy(f.records.data(), bytes.data() + at, area);
  for (std::size_t i = 0; i < f.records.size(); ++i) {
    const Record& r = f.records[i];
    if (static_cast<int>(r.kind) >= kRecordKinds || r.end_ns < r.start_ns || r.id == 0)
      throw bad(fmt::format("record {} is corrupt (kind {}, id {}, start {} end {})", i,
                            static_cast<int>(r.kind), r.id, r.start_ns, r.end_ns));
    // -1 is the coordinator (and "no peer"); anything lower was never written by a run.
    if (r.stage < kCoordinator || r.peer < kCoordinator)
      throw bad(fmt::format("record {} is corrupt (stage {}, peer {})", i, r.stage, r.peer));
  }
  return f;
}

TraceFile read_trace_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("trace file {}: cannot be opened", path.string()));
  std::ostringstream buf;
  buf << in.rdbuf();
  TraceFile f = decode_trace_file(buf.str(), path.string());
  f.path = path;
  return f;
}

std::string trace_file_name(std::uint32_t process_index) {
  return fmt::format("process-{}{}", process_index, kTraceExtension);
}

}  // namespace conveyor::trace
